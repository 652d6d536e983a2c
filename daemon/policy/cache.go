package policy

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/termd/termd/daemon/policy/decision"
	"github.com/termd/termd/daemon/policy/toolspec"
)

// Cache remembers decisions, so that the same request decided again (a
// plan's decision at CreatePlan and again in Execute's check, an agent's
// repeated `git status`) costs the file system's answers only.
//
// What a decision depends on, and how the cache holds each:
//   - the policy: an entry belongs to one *Policy (compared by identity,
//     and its version is in the key). A reload, a project layer loaded or
//     narrowed again, is a new *Policy, so nothing decided under the old
//     one is found;
//   - the request and the daemon's context, every field of both (keyOf;
//     TestCacheKeyCoversEveryField changes each field in turn): argv or
//     command, cwd, env, mode, timeout, sandbox, terminal, credentials,
//     privileged, network, stdin; workspaces, protected paths, home, the
//     sandbox's enforcement, the caller's credentials and their programs,
//     the egress lists. The caller's identity and role reach a decision
//     only through these;
//   - the file system: an entry keeps every path component the decision
//     resolved (its PathMemo) and every other answer it got
//     (toolspec.Observer: stat and lstat modes, the program's hash, its
//     ELF or #! interpreters, setuid bits, hard links, permissions,
//     symlinks, entry file digests). A hit asks all of them again and is
//     used only when every answer is the same; otherwise the request is
//     decided afresh. A decision that asked the file system in a way that
//     is not written down (a tool's hooks, its project entry files, its
//     chdir option, a panic) is never cached.
//
// Grants are not an input of a decision (the broker matches them after
// it), so they need no place in the key.
//
// Memory is bounded: at most maxEntries entries and maxBytes of their
// estimated size (least recently used first out); a single decision larger
// than maxBytes/16 is not kept. Safe for concurrent use. A nil *Cache
// decides every time.
type Cache struct {
	maxEntries int
	maxBytes   int64

	mu    sync.Mutex
	bytes int64
	byKey map[cacheKey]*list.Element
	lru   list.List // of *cacheEntry, most recent first

	hits, misses, stale, tainted atomic.Uint64
}

// Default bounds of NewCache(0, 0).
const (
	DefaultCacheEntries = 1024
	DefaultCacheBytes   = 4 << 20
)

type cacheKey [sha256.Size]byte

type cacheEntry struct {
	key cacheKey
	// pol is the policy it was decided under: weak, so that entries do not
	// keep a replaced policy alive (a collected one is found by no lookup).
	pol  weak.Pointer[Policy]
	ex   Explanation // never handed out: each hit gets a copy
	memo toolspec.PathMemo
	obs  []toolspec.Observation
	size int64
}

// NewCache returns an empty cache; 0 takes the default bound.
func NewCache(maxEntries int, maxBytes int64) *Cache {
	if maxEntries <= 0 {
		maxEntries = DefaultCacheEntries
	}
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	return &Cache{maxEntries: maxEntries, maxBytes: maxBytes, byKey: map[cacheKey]*list.Element{}}
}

// CacheStats counts what the cache did.
type CacheStats struct {
	Hits    uint64 // answered from an entry whose answers all held
	Misses  uint64 // decided: no entry
	Stale   uint64 // decided: an entry whose file system answers changed
	Tainted uint64 // decided and not kept (see Cache)
	Entries int
	Bytes   int64
}

func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	n, b := c.lru.Len(), c.bytes
	c.mu.Unlock()
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Stale: c.stale.Load(), Tainted: c.tainted.Load(), Entries: n, Bytes: b}
}

// Decide is p.Decide(req, ctx), from the cache when it still holds.
func (c *Cache) Decide(p *Policy, req Request, ctx Context) Decision {
	return c.Explain(p, req, ctx).Decision
}

// Explain is p.Explain(req, ctx), from the cache when it still holds.
func (c *Cache) Explain(p *Policy, req Request, ctx Context) Explanation {
	if c == nil {
		return p.Explain(req, ctx)
	}
	key := keyOf(p, req, ctx)
	if e := c.lookup(key, p); e != nil {
		if e.memo.Unchanged() && (&toolspec.Observer{Obs: e.obs}).Unchanged() {
			c.hits.Add(1)
			return cloneExplanation(e.ex)
		}
		c.stale.Add(1)
		c.remove(e)
	} else {
		c.misses.Add(1)
	}
	obs := &toolspec.Observer{}
	d, memo := p.decideObserved(req, ctx, obs)
	ex := p.explainOf(d)
	if obs.Tainted != "" {
		c.tainted.Add(1)
		return ex
	}
	e := &cacheEntry{key: key, pol: weak.Make(p), ex: cloneExplanation(ex), memo: memo, obs: obs.Obs}
	e.size = e.estimate()
	c.store(e)
	return ex
}

func (c *Cache) lookup(key cacheKey, p *Policy) *cacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok {
		return nil
	}
	e := el.Value.(*cacheEntry)
	if e.pol.Value() != p {
		return nil
	}
	c.lru.MoveToFront(el)
	return e
}

func (c *Cache) remove(e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[e.key]; ok && el.Value == e {
		c.dropLocked(el)
	}
}

func (c *Cache) dropLocked(el *list.Element) {
	e := c.lru.Remove(el).(*cacheEntry)
	delete(c.byKey, e.key)
	c.bytes -= e.size
}

func (c *Cache) store(e *cacheEntry) {
	if e.size > c.maxBytes/16 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[e.key]; ok {
		c.dropLocked(el)
	}
	c.byKey[e.key] = c.lru.PushFront(e)
	c.bytes += e.size
	for c.lru.Len() > c.maxEntries || c.bytes > c.maxBytes {
		c.dropLocked(c.lru.Back())
	}
}

// estimate is the entry's size in bytes, roughly: its strings and a fixed
// overhead per element.
func (e *cacheEntry) estimate() int64 {
	n := int64(512 + len(e.ex.Request))
	strs := func(ss []string) {
		for _, s := range ss {
			n += int64(16 + len(s))
		}
	}
	kv := func(m map[string]string) {
		for k, v := range m {
			n += int64(48 + len(k) + len(v))
		}
	}
	d := &e.ex.Decision
	strs(d.Reasons)
	strs(d.Rules)
	strs(d.Argv)
	strs(d.ExecArgv)
	strs(d.Writes)
	strs(d.Credentials)
	strs(d.Sandbox.Exec)
	strs(d.Sandbox.Read)
	strs(d.Sandbox.Write)
	strs(d.Sandbox.Cache)
	kv(d.Env)
	kv(d.ExecEnv)
	kv(d.ProjectFiles)
	for _, s := range d.Steps {
		n += int64(48 + len(s.Name) + len(s.Outcome) + len(s.Detail))
	}
	n += e.memo.Bytes()
	for _, o := range e.obs {
		n += int64(56 + len(o.A) + len(o.B) + len(o.Answer))
	}
	return n
}

// keyOf hashes the policy's version and every field of the request and the
// context, each length-prefixed (nil and empty told apart).
func keyOf(p *Policy, req Request, ctx Context) cacheKey {
	k := keyWriter{h: sha256.New()}
	k.str(p.version)
	// Request.
	k.strs(req.Argv)
	k.str(req.Command)
	k.str(req.Cwd)
	k.env(req.Env)
	k.str(string(req.Mode))
	k.num(int64(req.Timeout))
	k.str(req.Sandbox)
	k.flag(req.TTY != nil)
	if t := req.TTY; t != nil {
		k.num(int64(t.Rows))
		k.num(int64(t.Cols))
		k.num(int64(t.Idle))
	}
	k.strs(req.Credentials)
	k.flag(req.Privileged)
	k.str(req.Network)
	k.flag(req.Stdin != nil)
	if s := req.Stdin; s != nil {
		k.num(s.Bytes)
		k.str(s.SHA256)
	}
	// Context.
	k.strs(ctx.Workspaces)
	k.strs(ctx.Protected)
	k.str(ctx.Home)
	k.flag(ctx.Sandbox)
	k.str(ctx.SandboxBy)
	k.flag(ctx.Credentials != nil)
	k.num(int64(len(ctx.Credentials)))
	for _, name := range sortedNames(ctx.Credentials) {
		k.str(name)
		k.strs(ctx.Credentials[name].Programs)
	}
	k.strs(ctx.EgressLists)
	var out cacheKey
	k.h.Sum(out[:0])
	return out
}

type keyWriter struct {
	h   hash.Hash
	buf [10]byte
}

func (k *keyWriter) num(v int64) {
	n := binary.PutVarint(k.buf[:], v)
	k.h.Write(k.buf[:n])
}

func (k *keyWriter) flag(b bool) {
	if b {
		k.num(1)
	} else {
		k.num(0)
	}
}

func (k *keyWriter) str(s string) {
	k.num(int64(len(s)))
	k.h.Write([]byte(s))
}

func (k *keyWriter) strs(ss []string) {
	k.flag(ss != nil)
	k.num(int64(len(ss)))
	for _, s := range ss {
		k.str(s)
	}
}

func (k *keyWriter) env(m map[string]string) {
	k.flag(m != nil)
	k.num(int64(len(m)))
	for _, name := range sortedNames(m) {
		k.str(name)
		k.str(m[name])
	}
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// cloneExplanation copies ex so that nothing of it is shared: callers may
// change what they get (a project layer appends a reason, the broker
// redacts), and the cache's own copy must stay as decided.
func cloneExplanation(ex Explanation) Explanation {
	d := cloneDecision(ex.Decision)
	ex.Request = slices.Clone(ex.Request)
	ex.Decision = d
	// As explainOf builds it: these are the decision's own slices.
	ex.Reasons, ex.Rules, ex.Steps = d.Reasons, d.Rules, d.Steps
	return ex
}

func cloneDecision(d decision.Decision) decision.Decision {
	d.Reasons = slices.Clone(d.Reasons)
	d.Rules = slices.Clone(d.Rules)
	d.Argv = slices.Clone(d.Argv)
	d.ExecArgv = slices.Clone(d.ExecArgv)
	d.Env = maps.Clone(d.Env)
	d.ExecEnv = maps.Clone(d.ExecEnv)
	d.Writes = slices.Clone(d.Writes)
	d.ProjectFiles = maps.Clone(d.ProjectFiles)
	d.Sandbox.Exec = slices.Clone(d.Sandbox.Exec)
	d.Sandbox.Read = slices.Clone(d.Sandbox.Read)
	d.Sandbox.Write = slices.Clone(d.Sandbox.Write)
	d.Sandbox.Cache = slices.Clone(d.Sandbox.Cache)
	if d.TTY != nil {
		t := *d.TTY
		d.TTY = &t
	}
	d.Credentials = slices.Clone(d.Credentials)
	if d.Stdin != nil {
		s := *d.Stdin
		d.Stdin = &s
	}
	d.Steps = slices.Clone(d.Steps)
	return d
}
