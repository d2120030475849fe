package inboxmcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolFunc is a tool as the tools above write it: typed arguments in, a
// typed answer out.
type toolFunc[In, Out any] func(context.Context, *mcp.CallToolRequest, In) (*mcp.CallToolResult, Out, error)

// addTool adds a typed tool as the SDK's mcp.AddTool does, with the same
// schemas (derived from In and Out) and the same answers, but decodes the
// arguments and encodes the answer itself, once each. mcp.AddTool also
// validates both against their schemas, by decoding each into generic
// maps again, through a JSON decoder that takes a 32 KiB buffer for every
// value it reads: three quarters of a read_message call's allocations.
// Here the arguments are a few numbers, which encoding/json checks as
// strictly (a wrong type or an unknown field is refused), and the answer
// is a Go value of Out, which cannot fail its own schema.
func addTool[In, Out any](s *mcp.Server, t *mcp.Tool, h toolFunc[In, Out]) {
	tt := *t
	tt.InputSchema, tt.OutputSchema = schemaFor[In](), schemaFor[Out]()
	s.AddTool(&tt, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in In
		if err := decodeArgs(req.Params.Arguments, &in); err != nil {
			return toolError(err), nil
		}
		res, out, err := h(ctx, req, in)
		if err != nil {
			var wire *jsonrpc.Error
			if errors.As(err, &wire) {
				return nil, wire
			}
			return toolError(err), nil
		}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, fmt.Errorf("encoding %s's answer: %w", t.Name, err)
		}
		if res == nil {
			res = &mcp.CallToolResult{}
		}
		// The structured answer, and the same JSON as text for clients
		// that read only content (as the SDK does).
		res.StructuredContent = json.RawMessage(b)
		if res.Content == nil {
			res.Content = []mcp.Content{&mcp.TextContent{Text: string(b)}}
		}
		return res, nil
	})
}

// schemaFor is the JSON schema the SDK derives for T: an object whose
// fields are T's, with no others allowed.
func schemaFor[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("inboxmcp: schema of %T: %v", *new(T), err))
	}
	return s
}

// decodeArgs decodes a tool's arguments (absent: none) into in, refusing
// fields in has not and values of the wrong type.
func decodeArgs(raw json.RawMessage, in any) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(in); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	if dec.More() {
		return errors.New("invalid arguments: more than one JSON value")
	}
	return nil
}

func toolError(err error) *mcp.CallToolResult {
	var res mcp.CallToolResult
	res.SetError(err)
	return &res
}
