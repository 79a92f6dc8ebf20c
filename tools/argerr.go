package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// argError says what is wrong with an argument that the decoder refused,
// in the schema's words: "timeout_ms must be an integer, not a string"
// rather than encoding/json's "cannot unmarshal string into Go struct
// field waitArgs.timeout_ms of type int64", which names our types, not
// the caller's argument.
func argError(err error, dst any) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Field == "" || te.Type == nil {
		msg := err.Error()
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		return fmt.Errorf("arguments: %s", msg)
	}
	// For an element of a map or an array encoding/json names the
	// argument and the element's type: say which it is.
	if ft := fieldType(reflect.TypeOf(dst), te.Field); ft != nil && ft != te.Type {
		switch ft.Kind() {
		case reflect.Map:
			return fmt.Errorf("the values of %s must be %s, not %s", te.Field, plural(typeWords(te.Type)), valueWords(te.Value))
		case reflect.Slice, reflect.Array:
			return fmt.Errorf("the items of %s must be %s, not %s", te.Field, plural(typeWords(te.Type)), valueWords(te.Value))
		}
	}
	return fmt.Errorf("%s must be %s, not %s", te.Field, typeWords(te.Type), valueWords(te.Value))
}

// fieldType is the type of the argument at path ("ready.tcp_port") in the
// struct t (or a pointer to it) describes; nil if there is none.
func fieldType(t reflect.Type, path string) reflect.Type {
	for name := range strings.SplitSeq(path, ".") {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return nil
		}
		var next reflect.Type
		for i := range t.NumField() {
			if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); tag == name {
				next = t.Field(i).Type
				break
			}
		}
		if next == nil {
			return nil
		}
		t = next
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// typeWords names a Go argument type as the input schema does.
func typeWords(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array of " + plural(typeWords(t.Elem()))
	case reflect.Map:
		return "an object whose values are " + plural(typeWords(t.Elem()))
	}
	return "an object"
}

// plural turns "a string" into "strings", "an integer" into "integers".
func plural(words string) string {
	switch words {
	case "true or false":
		return "true or false"
	}
	w := strings.TrimPrefix(strings.TrimPrefix(words, "an "), "a ")
	return w + "s"
}

// valueWords names the JSON value encoding/json found: UnmarshalTypeError's
// Value is "string", "number", "number 1.5", "bool", "array" or "object".
func valueWords(v string) string {
	switch {
	case strings.HasPrefix(v, "number "):
		return strings.TrimPrefix(v, "number ")
	case v == "bool":
		return "true or false"
	case v == "array" || v == "object":
		return "an " + v
	case v == "":
		return "that value"
	}
	return "a " + v
}
