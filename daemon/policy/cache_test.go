package policy

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/verdict"
	"github.com/termd/termd/internal/cmdline"
)

// cacheCase is one request in one context.
type cacheCase struct {
	name string
	req  decision.Request
	ctx  decision.Context
}

// cacheWorld is the corpus fixture with the files the cache's mutations
// act on, and every request of the corpus (hostile cases in all their
// spellings, benign twins), of the agent day and a few of its own, each in
// several contexts.
func cacheWorld(t *testing.T) (*fixture, []cacheCase) {
	f := newFixture(t)
	for _, fl := range []string{"package.json", "Makefile", "go.mod", "notes.txt", "tool.sh", "private.txt", "sub2/keep.txt"} {
		mustWrite(t, f.ws+"/"+fl, "x\n")
	}
	if err := os.Chmod(f.ws+"/private.txt", 0o600); err != nil {
		t.Fatal(err)
	}
	var reqs []cacheCase
	add := func(name string, r decision.Request) { reqs = append(reqs, cacheCase{name: name, req: r}) }
	for _, c := range loadCorpus(t) {
		cwd := f.ws
		if c.Cwd != "" {
			if cwd = f.subst(c.Cwd); !strings.HasPrefix(cwd, "/") {
				cwd = f.ws + "/" + cwd
			}
		}
		env := map[string]string{}
		for k, v := range c.Env {
			env[k] = f.subst(v)
		}
		var timeout time.Duration
		if c.Timeout != "" {
			timeout, _ = time.ParseDuration(c.Timeout)
		}
		var tty *decision.Terminal
		if c.TTY {
			tty = &decision.Terminal{Rows: 24, Cols: 80}
		}
		base := decision.Request{Cwd: cwd, Env: env, Mode: verdict.Mode(c.Mode), Timeout: timeout, TTY: tty}
		if c.Cmd != "" {
			r := base
			r.Command = f.subst(c.Cmd)
			add(c.Name+"/cmd", r)
		} else {
			argv := make([]string, len(c.Argv))
			for i, a := range c.Argv {
				argv[i] = f.subst(a)
			}
			for sp, a := range spellings(f, argv) {
				r := base
				r.Argv = a
				add(c.Name+"/"+sp, r)
			}
		}
		if len(c.Twin) > 0 {
			twin := make([]string, len(c.Twin))
			for i, a := range c.Twin {
				twin[i] = f.subst(a)
			}
			add(c.Name+"/twin", decision.Request{Argv: twin, Cwd: f.ws, TTY: tty})
		}
	}
	data, err := os.ReadFile("testdata/agentday.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		cmd, _, _ := strings.Cut(l, "##")
		if cmd = strings.TrimSpace(cmd); cmd == "" || strings.HasPrefix(cmd, "#") {
			continue
		}
		argv, err := cmdline.Split(cmd)
		if err != nil {
			t.Fatal(err)
		}
		add("day/"+cmd, decision.Request{Argv: argv, Cwd: f.ws, Mode: verdict.ModeConfirm})
	}
	// What the mutations below change the answers of.
	for _, argv := range [][]string{
		{"cat", "notes.txt"}, {"head", "notes.txt"}, {"wc", "-l", "notes.txt"}, {"cat", "private.txt"},
		{"cp", "notes.txt", "target"}, {"mv", "notes.txt", "target"}, {"./tool.sh"}, {"ls"}, {"ls", "sub2"},
		{"cat", "sub2/keep.txt"}, {"grep", "-r", "x", "sub2"}, {"pwd"}, {"true"}, {"wc", "data.txt"},
		{f.bin + "/ls"}, {"rm", "notes.txt"}, {"sed", "-i", "s/x/y/", "data.txt"}, {"cat", "Makefile"},
	} {
		add("own/"+strings.Join(argv, " "), decision.Request{Argv: argv, Cwd: f.ws})
		add("own-sub2/"+strings.Join(argv, " "), decision.Request{Argv: argv, Cwd: f.ws + "/sub2"})
	}
	add("own/env", decision.Request{Argv: []string{"ls"}, Cwd: f.ws, Env: map[string]string{"LANG": "C.UTF-8"}})
	add("own/stdin", decision.Request{Argv: []string{"wc", "-l"}, Cwd: f.ws, Stdin: &decision.Stdin{Bytes: 3, SHA256: "ab"}})
	add("own/creds", decision.Request{Argv: []string{"ls"}, Cwd: f.ws, Credentials: []string{"TOK"}, Mode: verdict.ModeConfirm})
	add("own/network", decision.Request{Argv: []string{"curl", "https://example.com"}, Cwd: f.ws, Network: "host"})
	add("own/privileged", decision.Request{Argv: []string{"ls"}, Cwd: f.ws, Privileged: true})

	enforced := f.ctx
	enforced.Sandbox, enforced.SandboxBy = true, "Landlock"
	enforced.EgressLists = []string{"registries"}
	creds := f.ctx
	creds.Credentials = map[string]verdict.CredentialScope{"TOK": {Programs: []string{"ls"}}}
	otherWS := f.ctx
	otherWS.Workspaces = []string{f.ws + "/sub2"}
	otherHome := f.ctx
	otherHome.Home = f.ws
	ctxs := []cacheCase{{"unavailable", decision.Request{}, f.ctx}, {"enforced", decision.Request{}, enforced}, {"creds", decision.Request{}, creds}, {"other-ws", decision.Request{}, otherWS}, {"other-home", decision.Request{}, otherHome}}
	var out []cacheCase
	for i, r := range reqs {
		// The corpus in one context each (in turn), the day in two, the
		// requests of its own in every one.
		for j, c := range ctxs {
			own := strings.HasPrefix(r.name, "own")
			if own || j == i%len(ctxs) || strings.HasPrefix(r.name, "day/") && j == (i+1)%len(ctxs) {
				out = append(out, cacheCase{name: c.name + " " + r.name, req: r.req, ctx: c.ctx})
			}
		}
	}
	return f, out
}

// sameAsEngine decides every case with the engine (unless its answers are
// given: nothing changed since) and through the cache, and reports each
// difference; it returns the engine's answers.
func sameAsEngine(t *testing.T, stage string, c *Cache, pol *Policy, cases []cacheCase, wants ...Explanation) []Explanation {
	t.Helper()
	bad := 0
	for i, k := range cases {
		if len(wants) < len(cases) {
			wants = append(wants, pol.Explain(k.req, k.ctx))
		}
		want := wants[i]
		got := c.Explain(pol, k.req, k.ctx)
		if !reflect.DeepEqual(got, want) {
			if bad++; bad <= 5 {
				t.Errorf("%s: %s %q: the cache answered %s %q, the engine %s %q", stage, k.name, k.req.Argv, got.Verdict, got.Reasons, want.Verdict, want.Reasons)
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d cases differ in all", stage, bad)
	}
	return wants
}

// TestCacheDecidesAsTheEngine runs the decision corpus through the cache
// and the uncached engine, again after each change of the file system,
// after a policy reload and with a project layer: every answer must be the
// engine's.
func TestCacheDecidesAsTheEngine(t *testing.T) {
	f, cases := cacheWorld(t)
	c := NewCache(1<<20, 1<<40) // holds everything: a bound must not hide a wrong hit
	wants := sameAsEngine(t, "cold", c, f.pol, cases)
	sameAsEngine(t, "warm", c, f.pol, cases, wants...)
	st := c.Stats()
	t.Logf("after two rounds of %d: %+v", len(cases), st)
	if st.Hits < uint64(len(cases))/3 {
		t.Fatalf("the second round should mostly hit: %+v", st)
	}
	mustDo := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name   string
		mutate func()
	}{
		{"a symlink planted over a read file", func() {
			mustDo(os.Remove(f.ws + "/notes.txt"))
			mustDo(os.Symlink(f.home+"/.ssh/id_rsa", f.ws+"/notes.txt"))
		}},
		{"a trusted program swapped", func() {
			mustDo(os.Remove(f.bin + "/ls"))
			mustDo(os.Symlink("/usr/bin/false", f.bin+"/ls"))
		}},
		{"a trusted program removed", func() { mustDo(os.Remove(f.bin + "/wc")) }},
		{"a directory made where a copy goes", func() { mustDo(os.Mkdir(f.ws+"/target", 0o755)) }},
		{"a workspace script made executable", func() { mustDo(os.Chmod(f.ws+"/tool.sh", 0o755)) }},
		{"the cwd swapped for a link outside", func() {
			mustDo(os.Rename(f.ws+"/sub2", f.ws+"/sub2.old"))
			mustDo(os.Symlink(f.out, f.ws+"/sub2"))
		}},
		{"a private file hard-linked", func() { mustDo(os.Link(f.ws+"/private.txt", f.root+"/private-link")) }},
		{"a file made setuid", func() { mustDo(os.Chmod(f.ws+"/data.txt", os.ModeSetuid|0o755)) }},
		{"an entry file removed", func() { mustDo(os.Remove(f.ws + "/Makefile")) }},
	}
	// The rounds after a change decide the requests the changes are about
	// and the agent's day (the whole corpus again would take minutes).
	var some []cacheCase
	for _, k := range cases {
		if strings.Contains(k.name, " own") || strings.Contains(k.name, " day/") {
			some = append(some, k)
		}
	}
	for _, s := range steps {
		before := c.Stats()
		s.mutate()
		sameAsEngine(t, "after "+s.name, c, f.pol, some)
		if after := c.Stats(); after.Stale == before.Stale {
			t.Errorf("after %s no entry went stale: the change is not seen (%+v)", s.name, after)
		}
	}
	// A reload: the same text again, and an edited one.
	same := policyWithPath(t, f.bin)
	sameAsEngine(t, "reloaded unchanged", c, same, some)
	src := strings.Replace(string(defaultYAML), "trusted_path: [/usr/local/bin, /usr/bin, /bin, /usr/local/go/bin]", "trusted_path: ["+f.bin+"]", 1)
	src = strings.Replace(src, `{id: read.cat, program: cat, decision: allow, risk: low, reason: "prints files"`, `{id: read.cat, program: cat, decision: ask, risk: medium, reason: "cat asks after the reload"`, 1)
	edited, err := Parse("edited.yaml", []byte(src))
	mustDo(err)
	sameAsEngine(t, "reloaded edited", c, edited, some)
	// A project layer, then the layer changed.
	for _, body := range []string{
		"rules:\n  - {id: p.no-rm, program: rm, decision: deny, risk: high, reason: no removals here}\n",
		"rules:\n  - {id: p.ask-ls, program: ls, decision: ask, risk: medium, reason: ls needs approval here}\n",
	} {
		proj, err := Parse("proj.yaml", []byte(projectHeader+body))
		mustDo(err)
		narrowed, err := f.pol.Narrow(proj)
		mustDo(err)
		sameAsEngine(t, "project layer "+body, c, narrowed, some)
	}
}

// A decision from the cache is the caller's: changing it changes neither
// the cache's copy nor what the next caller gets.
func TestCacheAnswersAreCopies(t *testing.T) {
	f := newFixture(t)
	c := NewCache(0, 0)
	// A new request each time: the engine's decision shares the request's
	// argv, so scribbling on it would change the request.
	req := func() decision.Request {
		return decision.Request{Argv: []string{"ls", "-la"}, Cwd: f.ws, Env: map[string]string{"LANG": "C"}, TTY: &decision.Terminal{Rows: 2, Cols: 3}, Stdin: &decision.Stdin{Bytes: 1, SHA256: "x"}}
	}
	want := f.pol.Explain(req(), f.ctx)
	for i := 0; i < 3; i++ {
		got := c.Explain(f.pol, req(), f.ctx)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: the cache's answer differs from the engine's", i)
		}
		scribble(reflect.ValueOf(&got).Elem())
	}
	if st := c.Stats(); st.Hits != 2 {
		t.Fatalf("two hits expected: %+v", st)
	}
}

// scribble overwrites every string, slice element, map entry and pointed-to
// value it reaches.
func scribble(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("scribbled")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int64:
		v.SetInt(v.Int() + 7)
	case reflect.Uint16:
		v.SetUint(v.Uint() + 7)
	case reflect.Pointer:
		if !v.IsNil() {
			scribble(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			scribble(v.Field(i))
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			scribble(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			v.SetMapIndex(k, reflect.ValueOf("scribbled"))
		}
	}
}

// Every field of the request and of the context is part of the key: a
// field added to either must be added to keyOf (or this test says which).
func TestCacheKeyCoversEveryField(t *testing.T) {
	p := Default()
	check := func(what string, a, b decision.Request, ca, cb decision.Context) {
		t.Helper()
		if keyOf(p, a, ca) == keyOf(p, b, cb) {
			t.Errorf("the cache key does not change with %s", what)
		}
	}
	base := decision.Request{}
	rt := reflect.TypeOf(base)
	for i := 0; i < rt.NumField(); i++ {
		r := base
		setNonZero(t, rt.Field(i).Name, reflect.ValueOf(&r).Elem().Field(i))
		check("Request."+rt.Field(i).Name, base, r, decision.Context{}, decision.Context{})
	}
	cbase := decision.Context{}
	ct := reflect.TypeOf(cbase)
	for i := 0; i < ct.NumField(); i++ {
		c := cbase
		setNonZero(t, ct.Field(i).Name, reflect.ValueOf(&c).Elem().Field(i))
		check("Context."+ct.Field(i).Name, base, base, cbase, c)
	}
	// Inside the fields that are structs: each of their fields too.
	tty := decision.Request{TTY: &decision.Terminal{}}
	if n := reflect.TypeOf(decision.Terminal{}).NumField(); n != 3 {
		t.Errorf("Terminal has %d fields; keyOf knows 3", n)
	}
	check("TTY.Rows", tty, decision.Request{TTY: &decision.Terminal{Rows: 1}}, cbase, cbase)
	check("TTY.Cols", tty, decision.Request{TTY: &decision.Terminal{Cols: 1}}, cbase, cbase)
	check("TTY.Idle", tty, decision.Request{TTY: &decision.Terminal{Idle: 1}}, cbase, cbase)
	in := decision.Request{Stdin: &decision.Stdin{}}
	if n := reflect.TypeOf(decision.Stdin{}).NumField(); n != 2 {
		t.Errorf("Stdin has %d fields; keyOf knows 2", n)
	}
	check("Stdin.Bytes", in, decision.Request{Stdin: &decision.Stdin{Bytes: 1}}, cbase, cbase)
	check("Stdin.SHA256", in, decision.Request{Stdin: &decision.Stdin{SHA256: "x"}}, cbase, cbase)
	if n := reflect.TypeOf(verdict.CredentialScope{}).NumField(); n != 1 {
		t.Errorf("CredentialScope has %d fields; keyOf knows 1", n)
	}
	one := decision.Context{Credentials: map[string]verdict.CredentialScope{"A": {}}}
	check("CredentialScope.Programs", base, base, one, decision.Context{Credentials: map[string]verdict.CredentialScope{"A": {Programs: []string{"git"}}}})
	check("a credential's name", base, base, one, decision.Context{Credentials: map[string]verdict.CredentialScope{"B": {}}})
	// Values are length-prefixed: moving a word between fields is seen.
	check("argv split differently", decision.Request{Argv: []string{"ab", "c"}}, decision.Request{Argv: []string{"a", "bc"}}, cbase, cbase)
	check("env split differently", decision.Request{Env: map[string]string{"A": "B=C"}}, decision.Request{Env: map[string]string{"A=B": "C"}}, cbase, cbase)
	// And the policy.
	other := policyWithPath(t, "/nowhere")
	if keyOf(p, base, cbase) == keyOf(other, base, cbase) {
		t.Error("the cache key does not change with the policy's version")
	}
}

func setNonZero(t *testing.T, name string, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int64:
		v.SetInt(1)
	case reflect.Slice:
		v.Set(reflect.Append(reflect.MakeSlice(v.Type(), 0, 1), reflect.Zero(v.Type().Elem())))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		m.SetMapIndex(reflect.ValueOf("x"), reflect.Zero(v.Type().Elem()))
		v.Set(m)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	default:
		t.Fatalf("field %s is a %s: teach setNonZero and keyOf about it", name, v.Kind())
	}
}

// The cache keeps at most its bound, and concurrent deciders get the
// engine's answers.
func TestCacheIsBoundedAndConcurrent(t *testing.T) {
	f, cases := cacheWorld(t)
	c := NewCache(16, 64<<10)
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; i < len(cases); i += 2 {
				k := cases[i%len(cases)]
				want := f.pol.Explain(k.req, k.ctx)
				if got := c.Explain(f.pol, k.req, k.ctx); !reflect.DeepEqual(got, want) {
					select {
					case errs <- fmt.Sprintf("%s: the cache's answer differs", k.name):
					default:
					}
					return
				}
				if st := c.Stats(); st.Entries > 16 || st.Bytes > 64<<10 {
					select {
					case errs <- fmt.Sprintf("over the bound: %+v", st):
					default:
					}
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if st := c.Stats(); st.Hits == 0 || st.Entries == 0 {
		t.Fatalf("nothing was cached: %+v", st)
	}
}

// fsCall matches what asks the file system (or the clock, the environment,
// the user database) in the policy packages; within toolspec also its own
// helpers that do, called unqualified.
var fsCall = regexp.MustCompile(`(\b(os\.(Stat|Lstat|Open|OpenFile|ReadFile|Readlink|ReadDir|Getwd|Getenv|LookupEnv|Environ|Executable|Hostname|DirFS)|syscall\.(Open|Openat|Stat|Lstat|Fstat|Fstatat|Readlink|Getdents|Access|Getuid|Geteuid|Getgid)|unix\.[A-Z]\w*|filepath\.(EvalSymlinks|Glob|Walk|WalkDir|Abs)|exec\.LookPath|user\.Lookup\w*|program\.Exec|time\.Now|rand\.\w+|net\.(Lookup|Dial)\w*|exec\.Command|toolspec\.(ResolvePath|ResolveAbs|Exists|IsDir|IsSetID|HardLinked|PrivilegedOnly|RecursiveOutside|FileSHA256|ReadProjectFile|ProjectFiles|OptionFiles|ProjectEntryPaths)|PathMemo\(nil\))|\.WorkDir|(^|[^.\w])(ResolvePath|ResolveAbs|Exists|IsDir|IsSetID|HardLinked|PrivilegedOnly|RecursiveOutside|FileSHA256|ReadProjectFile|projectFileDigest|OptionFiles|openRead))\(`)

// TestDecisionCacheSeesEveryFileSystemCall holds the policy packages' file
// system calls to the places reviewed for the decision cache: a decision
// asks the file system only through its PathMemo, a probe (observe.go), or
// code whose caller taints the decision (tool hooks, project entry files, a
// tool's chdir option). A new call changes a count here: route it through a
// probe (or taint where it is reached), then update the table.
func TestDecisionCacheSeesEveryFileSystemCall(t *testing.T) {
	want := map[string]int{
		"decide.go": 3, // ProjectEntryPaths twice and WorkDir: each taints
		"policy.go": 1, // LoadFile: no part of a decision
		// The probes: answer() asks, the DecideCtx methods wrap it.
		"toolspec/observe.go": 20,
		// FileSHA256 and openRead, Exists, IsSetID: through probes; IsDir
		// only from a hook.
		"toolspec/context.go": 11,
		// The PathMemo (Lstat, Readlink) and ResolvePath without one (only
		// from hooks, WorkDir, Exists, entry files); HardLinked,
		// PrivilegedOnly, RecursiveOutside: through probes.
		"toolspec/paths.go": 12,
		// ProjectEntryPaths and OptionFiles (taint: entry files);
		// projectFileDigest: a probe.
		"toolspec/project.go":         7,
		"toolspec/readfile.go":        2,  // ReadProjectFile: only hooks call it
		"toolspec/tool.go":            1,  // WorkDir: its callers taint (checkPaths) or are hooks
		"unixtools/tool_files.go":     4,  // chmod --reference, cp -p: Check hooks
		"unixtools/tool_text.go":      4,  // diff: a DerivedReads hook
		"devtools/tool_git.go":        11, // FixedReads, DerivedReads, Check hooks
		"devtools/tool_go.go":         1,  // entry files' Extra
		"devtools/tool_javascript.go": 5,  // entry files' Dirs and Extra, the .npmrc Check
		"devtools/tool_make.go":       1,  // entry files' Extra
		"devtools/tool_python.go":     1,  // entry files' Dirs
		"devtools/tool_rust.go":       1,  // entry files' Extra
	}
	got := map[string]int{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(data), "\n") {
			if s := strings.TrimSpace(line); !strings.HasPrefix(s, "//") {
				got[path] += len(fsCall.FindAllString(line, -1))
			}
		}
		if got[path] == 0 {
			delete(got, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for f, n := range got {
		if want[f] != n {
			t.Errorf("%s asks the file system %d times, reviewed for the decision cache: %d (see this test's comment)", f, n, want[f])
		}
	}
	for f, n := range want {
		if _, ok := got[f]; !ok {
			t.Errorf("%s no longer asks the file system (reviewed: %d): update the table", f, n)
		}
	}
}
