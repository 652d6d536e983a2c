package config

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestConfigDocIsCurrent fails when docs/CONFIG.md no longer matches the
// Config struct: a key added, removed or redocumented without regenerating.
func TestConfigDocIsCurrent(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "..", "docs", "CONFIG.md")
	have, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v\nrun `go run ./daemon/config/gen` (or `make docs`) to create docs/CONFIG.md", err)
	}
	if string(have) != Markdown() {
		t.Fatal("docs/CONFIG.md differs from the Config struct's documentation;\n" +
			"run `go run ./daemon/config/gen` (or `make docs`) and commit the result")
	}
}

// TestEveryKeyIsDocumented: each leaf key says what it means.
func TestEveryKeyIsDocumented(t *testing.T) {
	for _, k := range Keys() {
		if k.Doc == "" {
			t.Errorf("config key %s has no doc tag", k.Name)
		}
	}
}

// TestExampleYAMLLoadsAndListsEveryKey: the installed example is a valid
// config that keeps every default, and names every key.
func TestExampleYAMLLoadsAndListsEveryKey(t *testing.T) {
	y, err := ExampleYAML(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := Default()
	if err := Parse(c, []byte(y)); err != nil {
		t.Fatalf("example does not parse: %v\n%s", err, y)
	}
	for _, k := range Keys() {
		short := k.Name[strings.LastIndex(k.Name, ".")+1:]
		if !strings.Contains(y, "#"+short+":") {
			t.Errorf("example lacks key %s", k.Name)
		}
	}
	// Uncommenting every leaf line with its shown default still parses.
	var lines []string
	for _, l := range strings.Split(y, "\n") {
		tl := strings.TrimLeft(l, " ")
		if strings.HasPrefix(tl, "#") && strings.Contains(tl, ":") && !strings.HasPrefix(tl, "# ") {
			l = l[:len(l)-len(tl)] + tl[1:]
		}
		lines = append(lines, l)
	}
	all := strings.Join(lines, "\n")
	c = Default()
	if err := Parse(c, []byte(all)); err != nil {
		t.Fatalf("example with every key uncommented does not parse: %v\n%s", err, all)
	}
	if c.ShutdownGrace.D().String() != "10s" || c.Adviser.BaseURL != "https://api.deepseek.com" || c.Sessions.PerPrincipal != 8 {
		t.Fatalf("uncommented defaults changed values: %+v", c)
	}
	// Every value shown is the default itself, never a description of it
	// (a key_file literally named after an environment variable).
	// Two keys are left unset by Default() and mean what the example shows:
	// OTLP's enabled (true: export when an endpoint is set) and the root map
	// uid (0: sandbox.DefaultRootMapUID, 65533).
	d := Default()
	d.Export.OTLP.Enabled, d.RootMapUID = c.Export.OTLP.Enabled, c.RootMapUID
	if *c.Export.OTLP.Enabled != true || c.RootMapUID != 65533 {
		t.Fatalf("uncommented otlp.enabled / sandbox_root_map_uid: %v %d", *c.Export.OTLP.Enabled, c.RootMapUID)
	}
	// Compared as YAML: an empty list and an unset one are the same config.
	gotY, err1 := yaml.Marshal(c)
	wantY, err2 := yaml.Marshal(d)
	if err1 != nil || err2 != nil || string(gotY) != string(wantY) {
		t.Fatalf("uncommenting the example changes the config (%v, %v):\n got %s\nwant %s", err1, err2, gotY, wantY)
	}
}

func TestExampleYAMLSetsKeys(t *testing.T) {
	y, err := ExampleYAML(map[string]string{"socket_group": "termd", "workspaces": "[/srv]"})
	if err != nil {
		t.Fatal(err)
	}
	c := Default()
	if err := Parse(c, []byte(y)); err != nil {
		t.Fatal(err)
	}
	if c.SocketGroup != "termd" || len(c.Workspaces) != 1 || c.Workspaces[0] != "/srv" {
		t.Fatalf("set keys not applied: %q %v", c.SocketGroup, c.Workspaces)
	}
	if _, err := ExampleYAML(map[string]string{"nope": "1"}); err == nil {
		t.Fatal("unknown key accepted")
	}
}
