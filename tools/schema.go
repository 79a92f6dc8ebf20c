package tools

import (
	"embed"
	"encoding/json"
)

// Every schema is generated from the Go type a tool decodes its arguments
// into or renders its result from (google/jsonschema-go, as the official
// go-sdk does): the json tags name the properties, the jsonschema tags
// describe them. What a tag cannot say, the bounds, enums and defaults,
// is set in schemagen_test.go from the constants that enforce them;
// TestSchemaBounds checks that each one is enforced.
//
// They are generated when the code changes, not at every start: the
// reflection and jsonschema-go's ordered marshalling would cost every
// server's start many times what reading them costs
// (docs/architecture/performance.md), and the package would not be linked
// at all. TestSchemasAreGenerated checks that schemas/ holds what the
// types give, and rewrites it with -update.
//
// Every property has a single type: a field that may have no value is left
// out rather than null (exit_code), because a client that maps tool schemas
// onto a one-type dialect (the OpenAPI subset of Gemini's function
// declarations) rejects ["integer", "null"]; the MCP Inspector's --strict
// warns of it (test/e2e/inspector_test.go).

//go:embed schemas
var generated embed.FS

// schemasOf are the input and output schema of tool, as generated.
func schemasOf(tool string) (in, out json.RawMessage) {
	read := func(kind string) json.RawMessage {
		b, err := generated.ReadFile("schemas/" + tool + "." + kind + ".json")
		if err != nil {
			panic("tools: no generated schema: " + err.Error())
		}
		return b
	}
	return read("in"), read("out")
}

// The encodings of tail_log and process_write.
const (
	encText   = "text"
	encBase64 = "base64"
)
