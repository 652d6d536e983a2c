package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Key is one configuration key as documented: its dotted name, YAML type,
// meaning and default, read from the Config struct's yaml/doc/default tags.
type Key struct {
	Name    string // dotted, e.g. "adviser.base_url"
	Type    string // duration, string, int, bool, list of strings, ...
	Doc     string
	Default string
	Depth   int  // nesting level (0 = top level)
	Section bool // a mapping holding further keys
}

// Keys lists every configuration key in file order.
func Keys() []Key {
	var out []Key
	walkKeys(reflect.TypeOf(Config{}), "", 0, &out)
	return out
}

func walkKeys(t reflect.Type, prefix string, depth int, out *[]Key) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		full := prefix + name
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		k := Key{Name: full, Doc: f.Tag.Get("doc"), Default: f.Tag.Get("default"), Depth: depth}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeOf(Duration(0)) {
			k.Section, k.Type = true, "mapping"
			if k.Doc == "" {
				k.Doc = sectionDocs[full]
			}
			*out = append(*out, k)
			walkKeys(ft, full+".", depth+1, out)
			continue
		}
		k.Type = typeName(ft)
		*out = append(*out, k)
	}
}

// sectionDocs describe the mappings whose fields carry no doc tag of their own.
var sectionDocs = map[string]string{
	"roles":           "who may do what; callers are identified by the socket's peer credentials (uid/gid), never by what they say",
	"roles.operators": "principals holding the operator role",
	"roles.agents":    "principals holding the agent role",
	"roles.viewers":   "principals holding the viewer role",
	"sessions":        "limits on sessions",
	"approvals":       "limits on approvals",
	"adviser":         "the optional OpenAI-compatible adviser that explains and flags plans; it never decides",
}

func typeName(t reflect.Type) string {
	if t == reflect.TypeOf(Duration(0)) {
		return "duration"
	}
	switch t.Kind() {
	case reflect.Slice:
		return "list of " + typeName(t.Elem()) + "s"
	case reflect.Map:
		return "mapping"
	case reflect.Uint32, reflect.Int, reflect.Int64:
		return "integer"
	case reflect.Bool:
		return "bool"
	default:
		return t.Kind().String()
	}
}

// Markdown renders docs/CONFIG.md.
func Markdown() string {
	var b strings.Builder
	b.WriteString(`# termd configuration

<!-- Generated from the Config struct in daemon/config/config.go by
     ` + "`go run ./daemon/config/gen`" + ` (or ` + "`make docs`" + `). Do not edit by hand: a test
     fails when this file differs from the generator's output. -->

termd reads one YAML file (` + "`termd --config FILE`" + `). Every key is optional; unknown keys
and bad values are errors that name the file, line and key, and termd refuses to start (on
SIGHUP it keeps the last good config). Command-line flags (` + "`--socket`, `--state-dir`, `--policy`,\n`--workspace`, `--log-level`, `--log-format`, `--console-url`, `--private`" + `) override the file
(` + "`--workspace` and `--private`" + ` add to the lists).

Durations are written as Go durations: ` + "`30s`, `15m`, `1h`" + `.

A complete file with every key commented out at its default is installed as
` + "`PREFIX/etc/termd/termd.yaml`" + ` by ` + "`make install`" + ` (print it with ` + "`termd config-default`" + `).

| Key | Type | Default | Meaning |
|-----|------|---------|---------|
`)
	for _, k := range Keys() {
		def := "—"
		if k.Default != "" {
			def = "`" + k.Default + "`"
			if strings.Contains(k.Default, " ") {
				def = k.Default
			}
		}
		typ := k.Type
		if k.Section {
			def = ""
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", k.Name, typ, def, mdEscape(k.Doc))
	}
	b.WriteString(`
## Notes

- **Run-as model.** When termd runs as root, a command runs as the requesting caller's uid/gid
  (` + "`run_as_requester`" + `); termd never raises a caller's privilege. In user mode commands run
  as the daemon's user.
- **Agents and operators should be different uids.** root and the daemon's own uid are always
  operators; an agent that shares a uid with an operator can approve its own plans.
  ` + "`termd doctor`" + ` says so plainly when the roles overlap.
- **Secrets.** ` + "`secrets`" + ` files and ` + "`adviser.api_key_file`" + ` must be mode 0600 or stricter; termd
  refuses to start otherwise. Their contents are redacted from plans, receipts, events and logs.
- **Metrics.** ` + "`metrics_listen`" + ` must be a loopback address; metrics carry counts and durations
  only, never commands, arguments or output.
`)
	return b.String()
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

// ExampleYAML renders a complete config file with every key, its meaning and
// default as comments. set gives top-level keys to write uncommented, as YAML
// values (e.g. "socket_group": "termd", "workspaces": "[/home]").
func ExampleYAML(set map[string]string) (string, error) {
	known := map[string]bool{}
	for _, k := range Keys() {
		if k.Depth == 0 {
			known[k.Name] = true
		}
	}
	var names []string
	for n := range set {
		if !known[n] {
			return "", fmt.Errorf("config-default: unknown top-level key %q", n)
		}
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(`# termd configuration (see docs/CONFIG.md).
#
# Every key is listed with its meaning and default. Commented-out keys keep
# their defaults; uncomment a line to change it. Unknown keys are errors.
# After editing: ` + "`termd doctor --config THIS_FILE`" + `, then ` + "`systemctl reload termd`" + ` (SIGHUP).
`)
	for _, k := range Keys() {
		ind := strings.Repeat("  ", k.Depth)
		if k.Depth == 0 {
			b.WriteString("\n")
		}
		for _, line := range wrap(k.Doc, 76-len(ind)) {
			fmt.Fprintf(&b, "%s# %s\n", ind, line)
		}
		if k.Default != "" && !k.Section {
			fmt.Fprintf(&b, "%s# default: %s\n", ind, k.Default)
		}
		short := k.Name[strings.LastIndex(k.Name, ".")+1:]
		if v, ok := set[k.Name]; ok && k.Depth == 0 {
			fmt.Fprintf(&b, "%s%s: %s\n", ind, short, v)
			continue
		}
		fmt.Fprintf(&b, "%s#%s:%s\n", ind, short, exampleValue(k))
	}
	return b.String(), nil
}

func exampleValue(k Key) string {
	if k.Section {
		return ""
	}
	switch k.Type {
	case "duration", "integer", "bool":
		if k.Default != "" {
			return " " + k.Default
		}
		return ""
	}
	if strings.HasPrefix(k.Type, "list") {
		return " []"
	}
	if k.Type == "mapping" {
		return " {}"
	}
	if k.Default != "" && !strings.ContainsAny(k.Default, " $,") {
		return " " + k.Default
	}
	return ` ""`
}

func wrap(s string, width int) []string {
	var lines []string
	cur := ""
	for _, w := range strings.Fields(s) {
		if cur != "" && len(cur)+1+len(w) > width {
			lines = append(lines, cur)
			cur = w
			continue
		}
		if cur != "" {
			cur += " "
		}
		cur += w
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return lines
}
