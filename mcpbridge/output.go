package mcpbridge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// terminal_output: an execution's output paged by byte offset.

// addOutputTool adds terminal_output.
func (b *Bridge) addOutputTool() {
	s := b.server
	addTool(s, &mcp.Tool{
		Name:        "terminal_output",
		Title:       "Read output",
		Description: "Read an execution's stdout or stderr by byte offset, while it runs or after; says when more is available.",
		Annotations: &mcp.ToolAnnotations{Title: "Read output", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, b.output)
}

// OutputInput pages an execution's output.
type OutputInput struct {
	ExecutionID string `json:"execution_id"`
	Stream      string `json:"stream,omitempty" jsonschema:"stdout (default) or stderr"`
	Offset      int64  `json:"offset,omitempty" jsonschema:"byte offset to read from (next_offset of the previous page)"`
	Limit       int    `json:"limit,omitempty" jsonschema:"maximum bytes to return (default 16384, max 262144)"`
}

func (b *Bridge) output(ctx context.Context, req *mcp.CallToolRequest, in OutputInput) (*mcp.CallToolResult, *OutputView, error) {
	if in.ExecutionID == "" {
		return nil, nil, errors.New("execution_id is required")
	}
	stream := termdv1.OutputStream_OUTPUT_STREAM_STDOUT
	switch strings.ToLower(in.Stream) {
	case "", "stdout":
	case "stderr":
		stream = termdv1.OutputStream_OUTPUT_STREAM_STDERR
	default:
		return nil, nil, fmt.Errorf("unknown stream %q. Next: use stdout or stderr", in.Stream)
	}
	if in.Offset < 0 || in.Limit < 0 {
		return nil, nil, errors.New("offset and limit must not be negative")
	}
	limit := in.Limit
	if limit == 0 {
		limit = 16 << 10
	}
	limit = min(limit, 256<<10)
	r, err := b.c.Executions.ReadOutput(ctx, &termdv1.ReadOutputRequest{ExecutionId: in.ExecutionID, Stream: stream, Offset: in.Offset, Limit: int32(limit)})
	if err != nil {
		return nil, nil, failure(err, "")
	}
	data, next := r.GetData(), r.GetNextOffset()
	eof := r.GetEof()
	// Do not split a UTF-8 character across pages: hand its start back.
	if !eof || next < r.GetTotalBytes() {
		if cut := incompleteRuneTail(data); cut > 0 && cut < len(data) {
			data, next = data[:len(data)-cut], next-int64(cut)
		}
	}
	v := &OutputView{
		ExecutionID: in.ExecutionID,
		Stream:      enumWord(stream.String(), "OUTPUT_STREAM_"),
		Offset:      r.GetOffset(),
		NextOffset:  next,
		TotalBytes:  r.GetTotalBytes(),
		Data:        strings.ToValidUTF8(string(data), "\uFFFD"),
		// The daemon says eof once the execution has ended and everything it
		// kept was read; output past the cap (or binary output) is not kept.
		EOF:       eof,
		Truncated: r.GetTruncated(),
	}
	v.More = !v.EOF
	switch {
	case next < r.GetKeptBytes():
		v.NextStep = fmt.Sprintf("more output is available: call terminal_output with offset %d", next)
	case v.More:
		v.NextStep = fmt.Sprintf("the command is still running; call terminal_output later with offset %d", next)
	case r.GetTruncated():
		v.NextStep = fmt.Sprintf("this is the end of what termd kept: %d of %d bytes (the output cap, or binary output, which is never kept); the receipt has the full byte count and digest", r.GetKeptBytes(), r.GetTotalBytes())
	}
	summary := fmt.Sprintf("%s bytes %d–%d of %d", v.Stream, v.Offset, v.NextOffset, v.TotalBytes)
	if v.NextStep != "" {
		summary += ". Next: " + v.NextStep
	}
	return reply(v, false, summary+"\n"+v.Data, "data")
}

// incompleteRuneTail returns how many trailing bytes of p start a UTF-8
// character that p does not finish.
func incompleteRuneTail(p []byte) int {
	for i := 1; i <= 3 && i <= len(p); i++ {
		c := p[len(p)-i]
		if utf8.RuneStart(c) {
			if !utf8.FullRune(p[len(p)-i:]) {
				return i
			}
			return 0
		}
	}
	return 0
}
