package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/wire"
)

// DefaultWait is how long terminal_execute waits for a command before handing
// it back as running: below the common MCP client request timeouts (60 s).
const DefaultWait = 45 * time.Second

// MaxWait bounds wait_seconds.
const MaxWait = 10 * time.Minute

// outputCap bounds the output a terminal_execute result carries per stream.
const outputCap = 32 << 10

func ptr[T any](v T) *T { return &v }

// addTools adds every tool, one call per tool family (a file each).
func (b *Bridge) addTools() {
	b.addRunTool()
	b.addPlanTools()
	b.addExecutionTools()
	b.addOutputTool()
	b.addReceiptTool()
	b.addPolicyTool()
	b.addAdviseTool()
	b.addRecipeTools()
	b.addTerminalTools()
	b.addHistoryTool()
	b.addPortForwardTool()
}

// addTool adds a tool whose input schema is inferred from In, with Go
// slices and maps as plain "array" / "object" (inference alone types them
// ["null","array"], and the Inspector then refuses to send an array).
//
// The schemas come from toolschemas/ (schemas.go) as JSON text, put
// into tools/list answers as they are (withFileSchemas), and parsed and
// resolved for validation at a tool's first call, not at start-up.
// Inferring them by reflection, resolving them and marshalling them for
// tools/list was most of the bridge's own cold start. The SDK itself gets
// only the plain object schema (anyObject): it encodes and decodes the
// input schema it is given again, at AddTool and at every 2026-07-28
// tools/call over HTTP, looking for x-mcp-header annotations, which no
// termd tool has. Adding a tool reads none of its schema files (only that
// they exist). A tool missing from the file (its test fails) falls back to
// the SDK's inference.
func addTool[In, Out any](s *mcp.Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	if !useSchemaFile || !hasSchemaFile(t.Name) {
		in := inputSchema[In](t.Name)
		var out *jsonschema.Schema
		if listsOutputSchema[t.Name] {
			out = outputSchema[Out](t.Name)
		}
		if recordSchemas != nil {
			recordSchemas(t.Name, in, out)
		}
		var sc toolSchema
		sc.Input, _ = json.Marshal(in)
		t.InputSchema = sc.Input
		if out != nil {
			sc.Output, _ = json.Marshal(out)
			t.OutputSchema = sc.Output
		}
		addTyped(s, t, func() toolSchema { return sc }, h)
		return
	}
	t.InputSchema = anyObject
	addTyped(s, t, func() toolSchema { return toolSchemas()[t.Name] }, h)
}

// listsOutputSchema names the tools whose output schema tools/list
// carries: terminal_run's, the result an agent reads most. The others'
// results carry structuredContent all the same; their schemas (two thirds
// of a tools/list answer, which every conversation pays for) were left
// out: no MCP client in use needs them to read a result.
var listsOutputSchema = map[string]bool{"terminal_run": true}

// addTyped adds a tool whose schemas (from schema) are resolved at its
// first call.
func addTyped[In, Out any](s *mcp.Server, t *mcp.Tool, schema func() toolSchema, h mcp.ToolHandlerFor[In, Out]) {
	name := t.Name
	resolved := sync.OnceValues(func() (*typedTool[In, Out], error) { return resolveTool[In, Out](name, schema()) })
	s.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tt, err := resolved()
		if err != nil {
			return nil, err
		}
		return tt.call(ctx, req, h)
	})
}

// inputSchema infers a tool's input schema from its Go type.
func inputSchema[In any](tool string) *jsonschema.Schema {
	schema, err := jsonschema.For[In](&jsonschema.ForOptions{TypeSchemas: plainContainers})
	if err != nil {
		panic(fmt.Sprintf("tool %s: input schema: %v", tool, err)) // a programming error, caught by every test
	}
	for _, p := range schema.Properties {
		// An optional object (a pointer field, e.g. tty) is inferred as
		// ["null","object"]: say "object", for the same reason.
		if len(p.Types) == 2 && p.Types[0] == "null" {
			p.Type, p.Types = p.Types[1], nil
		}
	}
	return schema
}

var plainContainers = map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[[]string]():          {Type: "array", Items: &jsonschema.Schema{Type: "string"}},
	reflect.TypeFor[map[string]string](): {Type: "object", AdditionalProperties: &jsonschema.Schema{Type: "string"}},
}

// reply builds a tool result whose text is a summary for a person followed by
// the structured output as JSON (for clients that ignore structuredContent,
// as MCP recommends). Fields the summary already quotes in full (inSummary:
// a command's output, a page of it, the adviser's text) are left out of
// that JSON, so a model reading the text does not read them twice;
// structuredContent has everything.
//
// out is encoded once here, and that encoding is the result's
// structuredContent as well (typedTool.call keeps it instead of encoding
// out again).
func reply[T any](out T, isError bool, summary string, inSummary ...string) (*mcp.CallToolResult, T, error) {
	data, err := json.Marshal(out)
	if err != nil {
		return replyShowing(out, out, isError, summary)
	}
	shown := data
	if len(inSummary) > 0 {
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) == nil {
			for _, k := range inSummary {
				delete(m, k)
			}
			if b, err := json.Marshal(m); err == nil {
				shown = b
			}
		}
	}
	content := []mcp.Content{&mcp.TextContent{Text: summary}, &mcp.TextContent{Text: string(shown)}}
	return &mcp.CallToolResult{Content: content, IsError: isError, StructuredContent: json.RawMessage(data)}, out, nil
}

// replyShowing is reply whose JSON text shows shown (out without what the
// summary already holds, such as stdout) instead of out.
func replyShowing[T any](out T, shown any, isError bool, summary string) (*mcp.CallToolResult, T, error) {
	content := []mcp.Content{&mcp.TextContent{Text: summary}}
	data, err := json.Marshal(shown)
	if err == nil {
		content = append(content, &mcp.TextContent{Text: string(data)})
	}
	return &mcp.CallToolResult{Content: content, IsError: isError}, out, nil
}

// failure is an isError result in words: what happened and what to do next.
func failure(err error, next string) error {
	msg := err.Error()
	var ce *client.Error
	if errors.As(err, &ce) {
		msg = ce.Message
		if ce.Hint != "" && next == "" {
			next = ce.Hint
		}
	}
	if next == "" {
		next = defaultNext(client.Code(err))
	}
	if next == "" {
		return errors.New(msg)
	}
	return fmt.Errorf("%s. Next: %s", strings.TrimSuffix(msg, "."), next)
}

func defaultNext(c codes.Code) string {
	switch c {
	case codes.InvalidArgument:
		return "fix the arguments and call the tool again"
	case codes.NotFound:
		return "check the id (ids come from terminal_plan / terminal_execute results)"
	case codes.PermissionDenied:
		return "this principal may not do that; ask the user (an operator) to do it with termctl"
	case codes.FailedPrecondition:
		return "read the state in the message; terminal_retry makes a fresh plan when one is stale or expired"
	case codes.ResourceExhausted:
		return "if the message names a session cap, ask the user to close idle sessions (`termctl sessions list`, then `termctl sessions close ID`); if it names running work, wait for it (terminal_status) or cancel it; then try again"
	case codes.Unavailable:
		return "termd is not reachable; ask the user to start it (or to give this user access to its socket)"
	}
	return ""
}

func (b *Bridge) clientKey(req *mcp.CallToolRequest) (key, label string) {
	label = "mcp"
	if ci := req.ClientInfo(); ci != nil && ci.Name != "" {
		label = "mcp: " + ci.Name
	}
	if req.Session != nil {
		key = req.Session.ID()
	}
	return key, label
}

// termctl is the termctl invocation that reaches this bridge's daemon.
func (b *Bridge) termctl() string {
	if s := b.c.Socket; s != "" && s != wire.SystemSocket {
		return "termctl --socket " + s
	}
	return "termctl"
}

// session returns the daemon session to use: the one asked for, or this
// client's own (created on first use).
func (b *Bridge) session(ctx context.Context, req *mcp.CallToolRequest, asked string) (string, bool, error) {
	if asked != "" {
		return asked, false, nil
	}
	key, label := b.clientKey(req)
	id, err := b.sessions.get(ctx, key, label)
	return id, true, err
}

func splitCommand(in []string, command string) ([]string, string, error) {
	if len(in) > 0 && command != "" {
		return nil, "", errors.New("give argv or command, not both. Next: call the tool again with one of them")
	}
	if len(in) == 0 && strings.TrimSpace(command) == "" {
		return nil, "", errors.New("no command given. Next: pass argv (e.g. [\"ls\",\"-la\"]) or command")
	}
	return in, command, nil
}
