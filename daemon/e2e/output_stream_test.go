package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/termd/termd/daemon/receiptstore"
	"github.com/termd/termd/internal/harness"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// TestFloodLiveOutputIsTheRedactedStream: `cat` of 3 MiB of secret-shaped
// lines with secrets planted across the read, redaction and event
// boundaries (64 KiB, 128 KiB, 512 KiB) comes out of the live events, put
// together by offset, as exactly the file with those secrets replaced:
// nothing lost, duplicated or moved by the output path's buffers, and no
// planted secret value in any event.
func TestFloodLiveOutputIsTheRedactedStream(t *testing.T) {
	d := harness.Start(t, harness.Options{})
	var b bytes.Buffer
	for i := 0; b.Len() < 3<<20; i++ {
		b.Write(secretShaped(i))
	}
	content := b.Bytes()[:3<<20]
	secrets := []string{"API_TOKEN=s3cr3tValue0001", "ghp_" + strings.Repeat("aB3d", 9), "api\u212aey=kelvinSecret42", "Password: hunter2hunter2"}
	k := 0
	for _, edge := range []int{64 << 10, 128 << 10, 512 << 10, 1 << 20, 3 << 19, 2 << 20, 5 << 19} {
		for _, back := range []int{3, 11, 20} {
			s := "\n" + secrets[k%len(secrets)] + "\n"
			copy(content[edge-back:], s)
			k++
		}
	}
	path := filepath.Join(d.Workspace, "flood.txt")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	want := receiptstore.NewRedactor().Redact(string(content))
	for _, s := range secrets {
		if strings.Contains(want, s[strings.IndexAny(s, "=:_")+1:]) {
			t.Fatalf("the reference redaction keeps %q: the test's secrets are not secrets", s)
		}
	}

	p := plan(t, d.Client, "", "cat", path)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := d.Client.Executions.ExecuteAndWait(ctx, &termdv1.ExecuteAndWaitRequest{PlanId: p.Id})
	if err != nil {
		t.Fatal(err)
	}
	var live bytes.Buffer
	var total int64 = -1
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("the stream ended before the receipt: %v", err)
		}
		ev := m.Event
		if ev.Kind == termdv1.EventKind_EVENT_KIND_LAGGED {
			t.Fatalf("the reader lagged: %v", ev)
		}
		if o := ev.GetOutput(); o != nil && o.Stream == termdv1.OutputStream_OUTPUT_STREAM_STDOUT {
			if o.Offset != int64(live.Len()) {
				t.Fatalf("an output event at offset %d after %d bytes", o.Offset, live.Len())
			}
			live.Write(o.Data)
		}
		if ev.Kind == termdv1.EventKind_EVENT_KIND_FINISHED {
			total = ev.GetExecution().GetStdoutBytes()
		}
		if ev.Kind == termdv1.EventKind_EVENT_KIND_RECEIPT_SIGNED {
			break
		}
	}
	if total != int64(len(content)) {
		t.Fatalf("the execution counted %d bytes of %d", total, len(content))
	}
	if got := live.String(); got != want {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("live output (%d bytes) differs from the redacted file (%d bytes) at byte %d: got %q, want %q",
			len(got), len(want), i, excerpt(got, i), excerpt(want, i))
	}
}

func excerpt(s string, at int) string {
	return fmt.Sprintf("…%s…", s[max(0, at-20):min(len(s), at+40)])
}
