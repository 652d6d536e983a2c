package receiptstore

import (
	"bytes"
	"strings"
	"testing"

	"github.com/termd/termd/receipt"
)

func TestRedactSecretShapes(t *testing.T) {
	// Each secret is built at run time so no real-looking credential sits in
	// the source.
	aws := "AKIA" + "ABCDEFGHIJKLMNOP"
	ghp := "ghp_" + strings.Repeat("a1B2", 9)
	gho := "gho_" + strings.Repeat("Zz09", 9)
	ghs := "ghs_" + strings.Repeat("x7Y8", 9)
	pat := "github_pat_" + strings.Repeat("11AB_cd", 10)
	slack := "xoxb-" + "123456789012-1234567890123-" + strings.Repeat("q", 24)
	openai := "sk-" + "proj-" + strings.Repeat("Ab3_", 10)
	deepseek := "sk-" + strings.Repeat("0f9e", 8)
	jwt := "eyJhbGciOiJIUzI1NiJ9" + "." + "eyJzdWIiOiIxMjM0In0" + "." + "c2lnbmF0dXJlLXNpZ25hdHVyZQ"
	pemKey := "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA" + strings.Repeat("Q", 64) + "\nabcdEFGH\n-----END RSA PRIVATE KEY-----"
	pemKey2 := "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk=\n-----END OPENSSH PRIVATE KEY-----"
	cases := []struct {
		name, in, secret string
		keep             []string // text that must survive
	}{
		{"authorization bearer", "curl -H 'Authorization: Bearer abc.def-123' https://x", "Bearer abc.def-123", []string{"Authorization:", "https://x"}},
		{"authorization basic header line", "Authorization: Basic dXNlcjpwYXNz\r\nHost: x", "dXNlcjpwYXNz", []string{"Host: x"}},
		{"authorization json", `{"authorization": "Token s3cr3tvalue", "a": 1}`, "s3cr3tvalue", []string{`"a": 1`}},
		{"env _KEY", "OPENAI_API_KEY=abc123xyz ./run", "abc123xyz", []string{"OPENAI_API_KEY=", "./run"}},
		{"env _TOKEN quoted", `export GH_TOKEN="tok en value"`, "tok en value", []string{"GH_TOKEN="}},
		{"env _SECRET", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG", "wJalrXUtnFEMI", nil},
		{"env _SECRET plain", "CLIENT_SECRET=zzzyyyxxx", "zzzyyyxxx", nil},
		{"password=", "mysql --password=hunter22 -u root", "hunter22", []string{"-u root"}},
		{"password= in url query", "https://x/login?user=a&password=pw0rd99&x=1", "pw0rd99", []string{"&x=1"}},
		{"json password", `{"user":"a","password": "p\"ss wörd"}`, `p\"ss wörd`, []string{`"user":"a"`}},
		{"json api_key", `{"api_key":"k-1234567"}`, "k-1234567", nil},
		{"yaml password", "password: hunter2x\nuser: bob", "hunter2x", []string{"user: bob"}},
		{"url password postgres", "DATABASE_URL=postgres://app:Sup3rPassw0rd@db.internal:5432/shop", "Sup3rPassw0rd", []string{"postgres://app:", "@db.internal:5432/shop"}},
		{"url password in output", "connecting to redis://:hunter2hunter@127.0.0.1:6379/0 ...", "hunter2hunter", []string{"@127.0.0.1:6379/0 ..."}},
		{"url password https", "git clone https://bot:ghx-9z9z9z9z@git.example.com/r.git", "ghx-9z9z9z9z", []string{"https://bot:", "git.example.com/r.git"}},
		{"aws access key", "key id " + aws + " found", aws, []string{"found"}},
		{"github ghp", "token " + ghp, ghp, nil},
		{"github gho", gho + " ok", gho, []string{" ok"}},
		{"github ghs", "x=" + ghs, ghs, nil},
		{"github pat", "use " + pat, pat, nil},
		{"slack", "hook " + slack, slack, nil},
		{"openai sk-proj", "key: " + openai, openai, nil},
		{"deepseek sk", "DEEPSEEK " + deepseek + "\n", deepseek, nil},
		{"jwt", "cookie=" + jwt + "; path=/", jwt, []string{"path=/"}},
		{"pem rsa", "before\n" + pemKey + "\nafter", "MIIEowIBAAKCAQEA", []string{"before", "after"}},
		{"pem openssh", pemKey2, "b3BlbnNzaC1rZXk", nil},
		{"pem unterminated", "x\n-----BEGIN PRIVATE KEY-----\nMIIBVwIBADANBgkq", "MIIBVwIBADANBgkq", []string{"x\n"}},
	}
	r := NewRedactor()
	for _, c := range cases {
		out := r.Redact(c.in)
		if strings.Contains(out, c.secret) {
			t.Errorf("%s: secret survives: %q", c.name, out)
		}
		if !strings.Contains(out, Redacted) {
			t.Errorf("%s: no marker in %q", c.name, out)
		}
		for _, k := range c.keep {
			if !strings.Contains(out, k) {
				t.Errorf("%s: lost %q: %q", c.name, k, out)
			}
		}
	}
	// Ordinary text is left alone.
	for _, plain := range []string{
		"git status --short", "task-manager-for-the-big-project", "ls -la /home/dev",
		"the key is in the drawer", "token bucket refill", "sk-short",
		`{"tokens_used": 12}`, "PATH=/usr/bin:/bin", "KEYBOARD=us",
		"https://example.com:8443/path?q=1", "ssh://git@github.com/o/r.git", "mailto:user@example.com",
	} {
		if out := r.Redact(plain); out != plain {
			t.Errorf("over-redacted %q -> %q", plain, out)
		}
	}
}

func TestRedactConfiguredSecrets(t *testing.T) {
	r := NewRedactor("adviser-key-9f8e7d", "abc") // "abc" is too short to redact
	r.AddSecret("gateway-token-Q1W2E3")
	in := "call adviser-key-9f8e7d then gateway-token-Q1W2E3 and adviser-key-9f8e7d; abc stays"
	out := r.Redact(in)
	if strings.Contains(out, "adviser-key") || strings.Contains(out, "gateway-token") {
		t.Fatalf("configured secret survives: %q", out)
	}
	if strings.Count(out, Redacted) != 3 || !strings.Contains(out, "abc stays") {
		t.Fatalf("unexpected: %q", out)
	}
}

func TestRedactReceiptFields(t *testing.T) {
	k := newKeys(t)
	sec := "S3cr3t-config-value"
	r := sampleReceipt(k, receipt.StatusFailed, "s")
	r.Command = "deploy --token=" + sec
	r.Policy.Argv = []string{"deploy", "--token=" + sec}
	r.Policy.Reasons = []string{"argument " + sec + " looks odd"}
	r.Cwd = "/tmp/" + sec
	r.Stdout = "using " + sec
	r.Stderr = "error: " + sec
	r.Detail = "detail " + sec
	NewRedactor(sec).RedactReceipt(r)
	r.ID, r.Seq, r.PrevHash = "x", 1, receipt.GenesisHash
	k.Sign(r)
	body, _ := receipt.CanonicalBytes(r)
	if bytes.Contains(body, []byte(sec)) {
		t.Fatalf("secret in receipt: %s", body)
	}
}

// A secret split across Write calls at every possible point is still
// redacted, and text around it passes through unchanged.
func TestStreamRedactorStraddlingSecret(t *testing.T) {
	aws := "AKIA" + "QWERTYUIOPASDFGH"
	conf := "configured-secret-value-42"
	pemKey := "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEI" + strings.Repeat("Z", 200) + "\n-----END EC PRIVATE KEY-----"
	input := "line one\nexport API_TOKEN=tok_abcdefgh\nid " + aws + " ok\n" + conf + "\n" + pemKey + "\ntail line\n"
	r := NewRedactor(conf)
	want := r.Redact(input)
	for _, secret := range []string{"tok_abcdefgh", aws, conf, "MHcCAQEEI", "ZZZZ"} {
		if strings.Contains(want, secret) {
			t.Fatalf("whole-string redaction leaks %q", secret)
		}
	}
	for _, hold := range []int{64, 256, DefaultHold} {
		for cut := 1; cut < len(input); cut++ {
			var out bytes.Buffer
			sr := r.NewStream(&out, hold)
			sr.Write([]byte(input[:cut]))
			sr.Write([]byte(input[cut:]))
			sr.Close()
			got := out.String()
			for _, secret := range []string{"tok_abcdefgh", aws, conf, "MHcCAQEEI", "ZZZZ"} {
				if strings.Contains(got, secret) {
					t.Fatalf("hold %d, cut %d: %q leaks: %q", hold, cut, secret, got)
				}
			}
			for _, keep := range []string{"line one\n", "export API_TOKEN=", " ok\n", "tail line\n"} {
				if !strings.Contains(got, keep) {
					t.Fatalf("hold %d, cut %d: lost %q: %q", hold, cut, keep, got)
				}
			}
		}
	}
	// Byte-at-a-time with a small hold, and the PEM block far longer than it.
	var out bytes.Buffer
	sr := r.NewStream(&out, 32)
	for i := 0; i < len(input); i++ {
		sr.Write([]byte{input[i]})
	}
	sr.Close()
	for _, secret := range []string{"tok_abcdefgh", aws, conf, "MHcCAQEEI", "ZZZZ"} {
		if strings.Contains(out.String(), secret) {
			t.Fatalf("byte-at-a-time: %q leaks: %q", secret, out.String())
		}
	}
	if !strings.HasSuffix(out.String(), "tail line\n") || !strings.HasPrefix(out.String(), "line one\n") {
		t.Fatalf("byte-at-a-time output: %q", out.String())
	}
}

// Output that pauses anywhere (an idle flush between two writes) still
// never shows a secret: complete lines go out at the pause, the unfinished
// line waits. (A full flush at the pause leaked "password=" + its value and
// the body of a PEM key cut inside its BEGIN line.)
func TestStreamRedactorPausesNeverLeak(t *testing.T) {
	aws := "AKIA" + "QWERTYUIOPASDFGH"
	conf := "configured-secret-value-42"
	pemKey := "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAK" + strings.Repeat("Q", 120) + "\n-----END RSA PRIVATE KEY-----"
	input := "start\npassword=hunter2hunter2\nid " + aws + " ok\n" + conf + "\n" + pemKey + "\nend\n"
	r := NewRedactor(conf)
	secrets := []string{"hunter2hunter2", aws, conf, "MIIEpAIBAAK", "QQQQ"}
	for cut := 1; cut < len(input); cut++ {
		var out bytes.Buffer
		sr := r.NewStream(&out, 0)
		sr.Write([]byte(input[:cut]))
		sr.FlushLines() // the pause
		atPause := out.String()
		sr.Write([]byte(input[cut:]))
		sr.Close()
		for _, secret := range secrets {
			if strings.Contains(out.String(), secret) {
				t.Fatalf("cut %d: %q leaks: %q", cut, secret, out.String())
			}
		}
		// Every complete line before the pause was out at the pause.
		if nl := strings.LastIndexByte(input[:cut], '\n'); nl >= 0 && !strings.Contains(input[:nl+1], "BEGIN") && len(atPause) == 0 {
			t.Fatalf("cut %d: nothing was flushed at the pause although %q was complete", cut, input[:nl+1])
		}
	}
}

// Output is emitted as it goes (bounded holdback), not only at Close.
func TestStreamRedactorIsBounded(t *testing.T) {
	var out bytes.Buffer
	sr := NewRedactor().NewStream(&out, 128)
	chunk := strings.Repeat("harmless output line\n", 50)
	for i := 0; i < 20; i++ {
		sr.Write([]byte(chunk))
		if held := (i+1)*len(chunk) - out.Len(); held > 4*128 {
			t.Fatalf("after %d chunks %d bytes are held back", i+1, held)
		}
	}
	sr.Close()
	if out.String() != strings.Repeat(chunk, 20) {
		t.Fatal("plain output changed")
	}
	// A secret-looking run longer than the bound is still cut off and
	// redacted, and what follows it is kept.
	out.Reset()
	sr = NewRedactor().NewStream(&out, 64)
	long := "sk-" + strings.Repeat("A", 2000)
	sr.Write([]byte("x " + long[:1000]))
	sr.Write([]byte(long[1000:] + " after\n"))
	sr.Close()
	if strings.Contains(out.String(), "AAAA") || !strings.HasSuffix(out.String(), " after\n") {
		t.Fatalf("long secret: %q", out.String())
	}
}

// The key-named rules match case-insensitively, which folds the Kelvin sign
// onto k and the long s onto s; the cheap literal filter in front of them
// must let such text through to the rule (and random bytes, where those
// letters' encodings turn up by chance, must not make it slow or lose text).
func TestRedactUnicodeFoldedKeys(t *testing.T) {
	r := NewRedactor()
	for _, in := range []string{
		"pa\u017fsword=hunter2hunter2",
		"API_\u212aEY=hunter2hunter2",
		"\"to\u212aen\": \"hunter2hunter2\"",
		"\xff\xc5\xbf\xe2\x84 pa\u017f\u017fword: hunter2hunter2 \xc5",
	} {
		if got := r.Redact(in); strings.Contains(got, "hunter2") {
			t.Errorf("%q: secret kept: %q", in, got)
		}
	}
	// Lookalikes of case-sensitive shapes stay (their rules do not fold).
	if in := "ghp-notatoken and GHP_ABCDEFGHIJKLMNOPQRSTUV"; r.Redact(in) != in {
		t.Errorf("%q changed: %q", in, r.Redact(in))
	}
}
