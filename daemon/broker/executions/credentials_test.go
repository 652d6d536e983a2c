package executions

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"

	"github.com/termd/termd/daemon/receiptstore"
)

// A credential's value is redacted in its plain, hex, URL-escaped and
// base64 forms, wherever it sits inside a longer base64 text (an HTTP
// Basic header encodes "user:value").
func TestRedactionFormsCatchEncodedValues(t *testing.T) {
	v := "s3cr3t/value+with=odd&chars"
	red := receiptstore.NewRedactor().With(RedactionForms(v)...)
	for _, prefix := range []string{"", "u", "us", "x-access-token:", "ab:"} {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding} {
			s := enc.EncodeToString([]byte(prefix + v + "\n"))
			out := red.Redact("data " + s) // not an Authorization header: the generic rules would catch that
			// At most two characters of the value's encoding may remain at
			// each edge; the middle must be gone.
			mid := enc.EncodeToString([]byte(prefix + v))[len(prefix)*4/3+3 : (len(prefix)+len(v))*4/3-3]
			if strings.Contains(out, mid) {
				t.Errorf("prefix %q: %s still holds the value's encoding", prefix, out)
			}
		}
	}
	for _, form := range []string{v, hex.EncodeToString([]byte(v)), url.QueryEscape(v), url.PathEscape(v)} {
		if out := red.Redact("got " + form + " here"); strings.Contains(out, form) {
			t.Errorf("%q not redacted: %s", form, out)
		}
	}
}
