package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
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
		// Only the name of an unknown member inside an object argument
		// (the top level's are checked before) is worth keeping.
		if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			return fmt.Errorf("unknown field %s in the arguments", name)
		}
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		return fmt.Errorf("arguments: %s", msg)
	}
	// encoding/json names a promoted field by its embedded struct too
	// ("Spec.argv"): the caller knows only the argument.
	te.Field = argPath(reflect.TypeOf(dst), te.Field)
	if msg := numberError(te); msg != "" {
		return errors.New(msg)
	}
	// For an element of a map or an array encoding/json names the
	// argument and the element's type: say which it is.
	if ft := fieldType(reflect.TypeOf(dst), te.Field); ft != nil && ft != te.Type {
		switch {
		case ft.Kind() == reflect.Map && ft.Elem() == te.Type:
			return fmt.Errorf("the values of %s must be %s, not %s", te.Field, plural(typeWords(te.Type)), valueWords(te.Value))
		case (ft.Kind() == reflect.Slice || ft.Kind() == reflect.Array) && ft.Elem() == te.Type:
			return fmt.Errorf("the items of %s must be %s, not %s", te.Field, plural(typeWords(te.Type)), valueWords(te.Value))
		default:
			return fmt.Errorf("%s must be %s", te.Field, typeWords(ft))
		}
	}
	return fmt.Errorf("%s must be %s, not %s", te.Field, typeWords(te.Type), valueWords(te.Value))
}

// numberError is what to say of a number an integer argument refused: a
// whole number too large for it is out of range (as runs says of one out
// of its bounds), 5.0 is a whole number spelled with a fraction, which
// encoding/json refuses where JSON Schema's "integer" would not. "" when
// the value is not a whole number, or the argument not an integer.
func numberError(te *json.UnmarshalTypeError) string {
	lit, ok := strings.CutPrefix(te.Value, "number ")
	if !ok || typeWords(te.Type) != "an integer" && typeWords(te.Type) != "a non-negative integer" {
		return ""
	}
	f, err := strconv.ParseFloat(lit, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return ""
	case errors.Is(err, strconv.ErrRange) || f == math.Trunc(f) && math.Abs(f) >= 1<<63:
		return fmt.Sprintf("%s %s is out of range", te.Field, lit)
	case f == math.Trunc(f):
		return fmt.Sprintf("%s must be written as an integer (%d), not %s", te.Field, int64(f), lit)
	}
	return ""
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
		for _, f := range argFields(t) {
			if f.name == name {
				next = f.Type
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

// argPath is path without the Go names of the embedded structs on it.
func argPath(t reflect.Type, path string) string {
	var out []string
	for name := range strings.SplitSeq(path, ".") {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t != nil && t.Kind() == reflect.Struct {
			if f, ok := t.FieldByName(name); ok && f.Anonymous {
				continue
			}
		}
		out = append(out, name)
		if t != nil && t.Kind() == reflect.Struct {
			t = fieldType(t, name)
		}
	}
	return strings.Join(out, ".")
}

// argField is a field of an arguments struct, and its argument's name.
type argField struct {
	reflect.StructField
	name string
}

// argFields are the arguments the struct t takes, in order: its exported
// fields with a json name, those of embedded structs included (a start's
// runrecord.Spec).
func argFields(t reflect.Type) []argField {
	var fields []argField
	for _, f := range reflect.VisibleFields(t) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous || !f.IsExported() || name == "" || name == "-" {
			continue
		}
		fields = append(fields, argField{f, name})
	}
	return fields
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

// plural turns "a string" into "strings", "an array of strings" into
// "arrays of strings": its head noun only.
func plural(words string) string {
	if words == "true or false" {
		return words
	}
	w := strings.TrimPrefix(strings.TrimPrefix(words, "an "), "a ")
	head, rest, _ := strings.Cut(w, " ")
	if rest != "" {
		rest = " " + rest
	}
	return head + "s" + rest
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
