package unixtools

import (
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/termd/termd/daemon/policy/grammar"
	"github.com/termd/termd/daemon/policy/toolspec"
	"github.com/termd/termd/daemon/policy/verdict"
)

var _ = toolspec.Family(registerNet)

// registerNet: curl and wget (http and https only; output names checked).
func registerNet() {
	R, W := grammar.KPathRead, grammar.KPathWrite
	// -q must come first: curl then reads no ~/.curlrc.
	toolspec.Register("curl", &toolspec.ToolSpec{ExecArgs: [][]string{{"-q"}}, Grammar: &grammar.CmdSpec{Net: true, Operand: grammar.KURL, Post: postCurl, Opts: grammar.Opts(grammar.Flags("-s|--silent -S|--show-error -L|--location -O|--remote-name -J|--remote-header-name -I|--head -i|--include -f|--fail --fail-with-body -v|--verbose -k|--insecure --compressed -G|--get -N|--no-buffer -#|--progress-bar --http1.0 --http1.1 --http2 --http3 --tlsv1.2 --tlsv1.3 -Z|--parallel -4|--ipv4 -6|--ipv6 --create-dirs --remote-name-all --location-trusted --fail-early -g|--globoff --no-progress-meter --no-keepalive --raw --ssl-reqd --path-as-is -q|--disable -h|--help -V|--version"),
		grammar.List(grammar.O("-o|--output=", W), grammar.O("--output-dir=", W), grammar.O("-H|--header="), grammar.O("-X|--request="), grammar.O("-d|--data|--data-ascii="), grammar.O("--data-raw="), grammar.O("--data-binary="), grammar.O("--data-urlencode="), grammar.O("--json="), grammar.O("-F|--form="), grammar.O("--form-string="), grammar.O("-u|--user="), grammar.O("-A|--user-agent="), grammar.O("-e|--referer="), grammar.O("-m|--max-time="), grammar.O("--connect-timeout="), grammar.O("--retry="), grammar.O("--retry-delay="), grammar.O("--retry-max-time="), grammar.O("-w|--write-out="), grammar.O("-r|--range="), grammar.O("-C|--continue-at="), grammar.O("-T|--upload-file=", R), grammar.O("-b|--cookie="), grammar.O("-c|--cookie-jar=", W), grammar.O("-x|--proxy="), grammar.O("--noproxy="), grammar.O("--url=", grammar.KURL), grammar.O("--cacert=", R), grammar.O("--capath=", R), grammar.O("--cert|-E=", R), grammar.O("--key=", R), grammar.O("--libcurl=", W), grammar.O("--trace=", W), grammar.O("--trace-ascii=", W), grammar.O("--stderr=", W), grammar.O("-D|--dump-header=", W), grammar.O("--etag-save=", W), grammar.O("--etag-compare=", R), grammar.O("--hsts=", W), grammar.O("--alt-svc=", W), grammar.O("--max-filesize="), grammar.O("--limit-rate="), grammar.O("--resolve="), grammar.O("--connect-to="), grammar.O("--max-redirs="), grammar.O("-z|--time-cond="), grammar.O("--proto=").DenyWith("changes the allowed protocols"), grammar.O("--proto-redir=").DenyWith("changes the allowed redirect protocols"), grammar.O("--oauth2-bearer="), grammar.O("--aws-sigv4="), grammar.O("-Y|--speed-limit="), grammar.O("-y|--speed-time="), grammar.O("--variable="), grammar.O("--netrc-file=", R),
			grammar.O("-K|--config=").DenyWith("reads options from a file"), grammar.O("-n|--netrc").DenyWith("reads credentials from ~/.netrc"), grammar.O("--netrc-optional").DenyWith("reads credentials from ~/.netrc"), grammar.O("--engine=").DenyWith("loads a crypto engine module")))}})
	toolspec.Register("wget", &toolspec.ToolSpec{ExecArgs: [][]string{{"--no-config"}}, Grammar: &grammar.CmdSpec{Net: true, Write: true, Operand: grammar.KURL, Post: postWget, Opts: grammar.Opts(grammar.Flags("-q|--quiet -c|--continue -N|--timestamping -r|--recursive -k|--convert-links -p|--page-requisites -m|--mirror -S|--server-response --spider --no-check-certificate -x|--force-directories --show-progress -v|--verbose -d|--debug -4|--inet4-only -6|--inet6-only --no-verbose --no-clobber --no-directories --no-parent -nH|--no-host-directories --content-disposition --no-cookies -h|--help -V|--version --https-only"),
		grammar.List(grammar.O("-O|--output-document=", W), grammar.O("-P|--directory-prefix=", W), grammar.O("-l|--level="), grammar.O("-t|--tries="), grammar.O("-T|--timeout="), grammar.O("--header="), grammar.O("-U|--user-agent="), grammar.O("--user="), grammar.O("--password="), grammar.O("--post-data="), grammar.O("--post-file=", R), grammar.O("--body-file=", R), grammar.O("--body-data="), grammar.O("--method="), grammar.O("-i|--input-file=", R), grammar.O("-o|--output-file=", W), grammar.O("-a|--append-output=", W), grammar.O("--limit-rate="), grammar.O("-w|--wait="), grammar.O("--restrict-file-names="), grammar.O("--cut-dirs="), grammar.O("-A|--accept="), grammar.O("-R|--reject="), grammar.O("--progress="), grammar.O("--max-redirect="), grammar.O("--load-cookies=", R), grammar.O("--save-cookies=", W), grammar.O("--ca-certificate=", R), grammar.O("--certificate=", R), grammar.O("--private-key=", R),
			grammar.O("-e|--execute=").DenyWith("runs wgetrc commands"), grammar.O("--config=").DenyWith("reads commands from a file"), grammar.O("--use-askpass?").DenyWith("runs a password program")))}})
}

var allowedURLSchemes = map[string]bool{"http": true, "https": true}

func checkURL(p *grammar.Parsed, v string) {
	if i := strings.Index(v, "://"); i >= 0 {
		scheme := strings.ToLower(v[:i])
		if !allowedURLSchemes[scheme] {
			p.Deny(verdict.RiskHigh, "%s: URL scheme %q is not allowed (only http and https)", p.Tool, grammar.Clip(scheme))
		}
	} else if strings.Contains(strings.ToLower(v), "file:") {
		p.Deny(verdict.RiskHigh, "%s: file: URLs are not allowed", p.Tool)
	}
}

func curlURLs(p *grammar.Parsed) []string {
	var urls []string
	for _, op := range p.Operands {
		urls = append(urls, op.Value)
	}
	return append(urls, p.Values("--url")...)
}

func postCurl(p *grammar.Parsed) {
	for _, v := range curlURLs(p) {
		checkURL(p, v)
		// curl expands [a-z] and {a,b} before it looks at the scheme:
		// "fil[e-e]:/etc/shadow" is a file: URL. A URL that can glob must
		// name its scheme literally.
		l := strings.ToLower(v)
		if !p.Has("-g") && strings.ContainsAny(v, "[]{}") && !strings.HasPrefix(l, "http://") && !strings.HasPrefix(l, "https://") {
			p.Deny(verdict.RiskHigh, "curl %s: a URL with [..] or {..} globs is expanded before its scheme is known; start it with http:// or https://, or pass -g", grammar.Clip(v))
		}
	}
	for _, u := range p.Opts {
		n := u.Opt.Names[0]
		switch {
		case n == "-d" || n == "--data-binary" || n == "--data-urlencode" || n == "--json":
			v := u.Value
			if n == "--data-urlencode" {
				if i := strings.IndexAny(v, "@="); i >= 0 && v[i] == '@' {
					v = v[i:]
				}
			}
			if strings.HasPrefix(v, "@") && v != "@-" {
				p.Paths = append(p.Paths, grammar.Operand{Value: v[1:], Kind: grammar.KPathRead})
			}
		case n == "-F":
			curlFormFiles(p, u.Value)
		case n == "-T" && !p.Has("-g") && strings.ContainsAny(u.Value, "[]{}"):
			// curl expands globs in -T names too: {f,/etc/shadow}.
			p.Deny(verdict.RiskHigh, "curl -T %s: a [..] or {..} glob names files that are not checked; name one file, or pass -g", grammar.Clip(u.Value))
		case n == "-w" && strings.Contains(u.Value, "%output{"):
			// curl 8.3+: -w '%output{FILE}' writes the rest of the format there.
			p.Deny(verdict.RiskHigh, "curl -w %%output{...} writes to a file that is not checked")
		case n == "-H" || n == "-w":
			// -H @FILE reads headers from a file (and sends them);
			// -w @FILE reads the output format from a file (and prints it).
			if strings.HasPrefix(u.Value, "@") && u.Value != "@-" {
				p.Paths = append(p.Paths, grammar.Operand{Value: u.Value[1:], Kind: grammar.KPathRead})
			}
		case n == "-b":
			// a cookie argument without '=' is a cookie file to read
			if !strings.Contains(u.Value, "=") && u.Value != "-" {
				p.Paths = append(p.Paths, grammar.Operand{Value: u.Value, Kind: grammar.KPathRead})
			}
		case n == "--variable":
			if i := strings.IndexAny(u.Value, "=@"); i >= 0 && u.Value[i] == '@' && u.Value[i+1:] != "-" {
				p.Paths = append(p.Paths, grammar.Operand{Value: u.Value[i+1:], Kind: grammar.KPathRead})
			}
		}
	}
	urls := curlURLs(p)
	writes := p.Has("-O", "--remote-name-all") || len(p.Values("-o")) > 0
	if writes && !p.Has("-g") {
		for _, u := range urls {
			if strings.ContainsAny(u, "{[") {
				p.Deny(verdict.RiskHigh, "%s: URL globbing ({...} or [...]) chooses output file names that are not checked; add --globoff", p.Tool)
				break
			}
		}
	}
	if p.Has("-J") {
		p.Deny(verdict.RiskHigh, "%s -J: the server chooses the output file name (not checked)", p.Tool)
	}
	if p.Has("-O", "--remote-name-all") {
		p.Write = true
		dir := ""
		if v := p.Values("--output-dir"); len(v) > 0 {
			dir = strings.TrimRight(v[len(v)-1], "/") + "/"
		}
		for _, u := range urls {
			if name := urlFileName(u, ""); name != "" {
				p.Paths = append(p.Paths, grammar.Operand{Value: dir + name, Kind: grammar.KPathWrite})
			}
		}
	}
	if dirs := p.Values("--output-dir"); len(dirs) > 0 {
		// -o NAME is relative to --output-dir
		d := strings.TrimRight(dirs[len(dirs)-1], "/") + "/"
		for _, o := range p.Values("-o") {
			if o != "-" && !strings.HasPrefix(o, "/") {
				p.Paths = append(p.Paths, grammar.Operand{Value: d + o, Kind: grammar.KPathWrite})
			}
		}
	}
	dropOutputSinks(p, "-o")
	for _, op := range p.Paths {
		if op.Kind == grammar.KPathWrite {
			p.Write = true
		}
	}
	p.Loopback = loopbackOnly(p, urls, !p.Has("-g"), curlElsewhere...)
}

// dropOutputSinks forgets the output option values that name no file: "-"
// (standard output) and /dev/null (which every sandbox profile may write),
// so `curl -s -o /dev/null -w '%{http_code}' URL` and `wget -qO- URL` write
// nothing. It reports whether every value of the option was one.
func dropOutputSinks(p *grammar.Parsed, name string) bool {
	all := true
	p.Paths = slices.DeleteFunc(p.Paths, func(op grammar.Operand) bool {
		if op.From == nil || op.From.Names[0] != name {
			return false
		}
		sink := op.Value == "-" || op.Value == "/dev/null"
		all = all && sink
		return sink
	})
	return all
}

// curlElsewhere are the curl options that send a request somewhere other
// than its URL's host: a proxy (-x), a host mapped to another address
// (--resolve, --connect-to), an alternative-services file (--alt-svc).
// Options the grammar does not know (--unix-socket, --preproxy, --doh-url)
// make the command unknown code, never a loopback client.
var curlElsewhere = []string{"-x", "--resolve", "--connect-to", "--alt-svc"}

// loopbackOnly: there is at least one URL, every URL names a loopback host
// (loopbackURL) and no option in elsewhere is used. Such a client reaches
// nothing but a loopback, so the policy may hold it to the workspace
// loopback (networkFor); its files are decided as before.
func loopbackOnly(p *grammar.Parsed, urls []string, globs bool, elsewhere ...string) bool {
	if len(urls) == 0 || p.Has(elsewhere...) {
		return false
	}
	for _, u := range urls {
		if !loopbackURL(u, globs) {
			return false
		}
	}
	return true
}

// loopbackURL reports whether a URL as curl and wget take it (with or
// without an http/https scheme, user and port) names a loopback host:
// localhost, an address in 127.0.0.0/8 written as four decimal numbers, or
// [::1]. Anything unusual is not loopback: a second '@', another spelling
// of an address (127.1, 0x7f000001, %-escapes), a port that is not digits,
// and, when curl expands globs, '{' or '}' or a '[' that does not open an
// IPv6 address in the host part.
func loopbackURL(u string, globs bool) bool {
	rest := u
	if i := strings.Index(rest, "://"); i >= 0 {
		if scheme := strings.ToLower(rest[:i]); scheme != "http" && scheme != "https" {
			return false
		}
		rest = rest[i+3:]
	}
	auth := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		auth = rest[:i]
	}
	if strings.Count(auth, "@") > 1 || (globs && strings.ContainsAny(auth, "{}")) {
		return false
	}
	if i := strings.IndexByte(auth, '@'); i >= 0 {
		auth = auth[i+1:]
	}
	host, port, v6 := auth, "", false
	if strings.HasPrefix(auth, "[") {
		j := strings.IndexByte(auth, ']')
		if j < 0 {
			return false
		}
		host, port, v6 = auth[1:j], auth[j+1:], true
	} else if i := strings.IndexByte(auth, ':'); i >= 0 {
		host, port = auth[:i], auth[i:]
	}
	if port != "" && (port[0] != ':' || strings.Trim(port[1:], "0123456789") != "") {
		return false
	}
	if !v6 && strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Is6() == v6 && a.Zone() == "" && a.IsLoopback()
}

// curlFormFiles records the files a -F value reads: name=@file,
// name=<file and ;headers=@file / ;headers=<file. Quoted file names are
// refused (their unquoting is curl's, not ours).
func curlFormFiles(p *grammar.Parsed, v string) {
	_, val, ok := strings.Cut(v, "=")
	if !ok {
		return
	}
	parts := strings.Split(val, ";")
	add := func(f string) {
		if strings.ContainsAny(f, "\"\\") {
			p.Deny(verdict.RiskHigh, "%s -F: quoted or escaped file names are not checked", p.Tool)
			return
		}
		for _, one := range strings.Split(f, ",") {
			if one != "" && one != "-" {
				p.Paths = append(p.Paths, grammar.Operand{Value: one, Kind: grammar.KPathRead})
			}
		}
	}
	if strings.HasPrefix(parts[0], "@") || strings.HasPrefix(parts[0], "<") {
		if strings.Contains(val, "\"") {
			p.Deny(verdict.RiskHigh, "%s -F: quoted or escaped file names are not checked", p.Tool)
			return
		}
		add(parts[0][1:])
	}
	for _, prm := range parts[1:] {
		if strings.Contains(prm, ",") {
			// "@f;type=text/plain,/other" is a second file to curl.
			p.Deny(verdict.RiskHigh, "%s -F: a ',' after ';' names more files, which are not checked", p.Tool)
			return
		}
		k, pv, _ := strings.Cut(strings.TrimSpace(prm), "=")
		if strings.EqualFold(k, "headers") && (strings.HasPrefix(pv, "@") || strings.HasPrefix(pv, "<")) {
			add(pv[1:])
		}
	}
}

// urlFileName is the file name a download tool derives from a URL: the last
// path segment (curl strips the query, wget keeps it), or dflt.
func urlFileName(u string, dflt string) string {
	rest := u
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	if i := strings.IndexAny(rest, "#"); i >= 0 {
		rest = rest[:i]
	}
	if dflt == "" {
		if i := strings.IndexByte(rest, '?'); i >= 0 {
			rest = rest[:i]
		}
	}
	i := strings.IndexByte(rest, '/')
	if i < 0 {
		return dflt
	}
	path := rest[i:]
	if q := strings.IndexByte(path, '?'); q >= 0 {
		// wget: "dir/file?x=1" is saved as "file?x=1"
		path = path[:strings.LastIndexByte(path[:q], '/')+1] + strings.ReplaceAll(path[q:], "/", "%2F")
	}
	name := path[strings.LastIndexByte(path, '/')+1:]
	if name == "" {
		return dflt
	}
	return name
}

func postWget(p *grammar.Parsed) {
	var urls []string
	for _, op := range p.Operands {
		checkURL(p, op.Value)
		urls = append(urls, op.Value)
	}
	p.Loopback = loopbackOnly(p, urls, false)
	if sinks := dropOutputSinks(p, "-O"); p.Has("--spider") || len(p.Values("-O")) > 0 && sinks {
		p.Write = false
	}
	for _, o := range []string{"-r", "-m", "-p"} {
		if p.Has(o) {
			p.Deny(verdict.RiskHigh, "wget %s: recursive retrieval writes files and directories named by the server (not checked)", o)
		}
	}
	if p.Has("--content-disposition") {
		p.Deny(verdict.RiskHigh, "wget --content-disposition: the server chooses the output file name (not checked)")
	}
	if p.Has("-i") {
		p.Deny(verdict.RiskHigh, "wget -i: the URLs (and so the output file names) in the list are not checked")
	}
	for _, v := range p.Values("--restrict-file-names") {
		if l := strings.ToLower(v); strings.Contains(l, "lowercase") || strings.Contains(l, "uppercase") {
			p.Deny(verdict.RiskHigh, "wget --restrict-file-names=%s: changes the case of saved names (\".GIT/CONFIG\" becomes .git/config), which is not checked", grammar.Clip(v))
		}
	}
	if p.Has("--cut-dirs") {
		p.Deny(verdict.RiskHigh, "wget --cut-dirs: the directories the saved file lands in are not checked")
	}
	if len(p.Values("-O")) > 0 || p.Has("--spider") {
		return
	}
	// Default output: the URL's last path segment (index.html for a
	// directory), under -P DIR, or HOST/PATH with -x.
	dir := ""
	if v := p.Values("-P"); len(v) > 0 {
		dir = strings.TrimRight(v[len(v)-1], "/") + "/"
	}
	for _, op := range p.Operands {
		name := urlFileName(op.Value, "index.html")
		if p.Has("-x") {
			rest := op.Value
			if i := strings.Index(rest, "://"); i >= 0 {
				rest = rest[i+3:]
			}
			if i := strings.LastIndexByte(rest, '/'); i >= 0 {
				name = rest[:i+1] + name
			} else {
				name = rest + "/" + name
			}
			if p.Has("--no-host-directories") {
				// -nH: PATH without the HOST/ directory.
				if i := strings.IndexByte(name, '/'); i >= 0 {
					name = name[i+1:]
				}
			}
		}
		p.Paths = append(p.Paths, grammar.Operand{Value: dir + name, Kind: grammar.KPathWrite})
		// wget decodes %XX in the names it saves ("%2Eenvrc" is ".envrc"):
		// the decoded name is checked too.
		if dec, err := url.PathUnescape(dir + name); err != nil {
			p.Deny(verdict.RiskHigh, "wget %s: the output file name has a malformed %%-escape (not checked)", grammar.Clip(op.Value))
		} else if dec != dir+name {
			p.Paths = append(p.Paths, grammar.Operand{Value: dec, Kind: grammar.KPathWrite})
		}
	}
}
