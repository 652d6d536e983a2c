package policy

import (
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

var _ = family(registerNet)

// registerNet: curl and wget (http and https only; output names checked).
func registerNet() {
	R, W := KPathRead, KPathWrite
	// -q must come first: curl then reads no ~/.curlrc.
	register("curl", &toolSpec{execArgs: [][]string{{"-q"}}, grammar: &cmdSpec{net: true, operand: KURL, post: postCurl, opts: opts(flags("-s|--silent -S|--show-error -L|--location -O|--remote-name -J|--remote-header-name -I|--head -i|--include -f|--fail --fail-with-body -v|--verbose -k|--insecure --compressed -G|--get -N|--no-buffer -#|--progress-bar --http1.0 --http1.1 --http2 --http3 --tlsv1.2 --tlsv1.3 -Z|--parallel -4|--ipv4 -6|--ipv6 --create-dirs --remote-name-all --location-trusted --fail-early -g|--globoff --no-progress-meter --no-keepalive --raw --ssl-reqd --path-as-is -q|--disable -h|--help -V|--version"),
		list(o("-o|--output=", W), o("--output-dir=", W), o("-H|--header="), o("-X|--request="), o("-d|--data|--data-ascii="), o("--data-raw="), o("--data-binary="), o("--data-urlencode="), o("--json="), o("-F|--form="), o("--form-string="), o("-u|--user="), o("-A|--user-agent="), o("-e|--referer="), o("-m|--max-time="), o("--connect-timeout="), o("--retry="), o("--retry-delay="), o("--retry-max-time="), o("-w|--write-out="), o("-r|--range="), o("-C|--continue-at="), o("-T|--upload-file=", R), o("-b|--cookie="), o("-c|--cookie-jar=", W), o("-x|--proxy="), o("--noproxy="), o("--url=", KURL), o("--cacert=", R), o("--capath=", R), o("--cert|-E=", R), o("--key=", R), o("--libcurl=", W), o("--trace=", W), o("--trace-ascii=", W), o("--stderr=", W), o("-D|--dump-header=", W), o("--etag-save=", W), o("--etag-compare=", R), o("--hsts=", W), o("--alt-svc=", W), o("--max-filesize="), o("--limit-rate="), o("--resolve="), o("--connect-to="), o("--max-redirs="), o("-z|--time-cond="), o("--proto=").denyWith("changes the allowed protocols"), o("--proto-redir=").denyWith("changes the allowed redirect protocols"), o("--oauth2-bearer="), o("--aws-sigv4="), o("-Y|--speed-limit="), o("-y|--speed-time="), o("--variable="), o("--netrc-file=", R),
			o("-K|--config=").denyWith("reads options from a file"), o("-n|--netrc").denyWith("reads credentials from ~/.netrc"), o("--netrc-optional").denyWith("reads credentials from ~/.netrc"), o("--engine=").denyWith("loads a crypto engine module")))}})
	register("wget", &toolSpec{execArgs: [][]string{{"--no-config"}}, grammar: &cmdSpec{net: true, write: true, operand: KURL, post: postWget, opts: opts(flags("-q|--quiet -c|--continue -N|--timestamping -r|--recursive -k|--convert-links -p|--page-requisites -m|--mirror -S|--server-response --spider --no-check-certificate -x|--force-directories --show-progress -v|--verbose -d|--debug -4|--inet4-only -6|--inet6-only --no-verbose --no-clobber --no-directories --no-parent -nH|--no-host-directories --content-disposition --no-cookies -h|--help -V|--version --https-only"),
		list(o("-O|--output-document=", W), o("-P|--directory-prefix=", W), o("-l|--level="), o("-t|--tries="), o("-T|--timeout="), o("--header="), o("-U|--user-agent="), o("--user="), o("--password="), o("--post-data="), o("--post-file=", R), o("--body-file=", R), o("--body-data="), o("--method="), o("-i|--input-file=", R), o("-o|--output-file=", W), o("-a|--append-output=", W), o("--limit-rate="), o("-w|--wait="), o("--restrict-file-names="), o("--cut-dirs="), o("-A|--accept="), o("-R|--reject="), o("--progress="), o("--max-redirect="), o("--load-cookies=", R), o("--save-cookies=", W), o("--ca-certificate=", R), o("--certificate=", R), o("--private-key=", R),
			o("-e|--execute=").denyWith("runs wgetrc commands"), o("--config=").denyWith("reads commands from a file"), o("--use-askpass?").denyWith("runs a password program")))}})
}

var allowedURLSchemes = map[string]bool{"http": true, "https": true}

func checkURL(p *parsed, v string) {
	if i := strings.Index(v, "://"); i >= 0 {
		scheme := strings.ToLower(v[:i])
		if !allowedURLSchemes[scheme] {
			p.deny(RiskHigh, "%s: URL scheme %q is not allowed (only http and https)", p.tool, clip(scheme))
		}
	} else if strings.Contains(strings.ToLower(v), "file:") {
		p.deny(RiskHigh, "%s: file: URLs are not allowed", p.tool)
	}
}

func curlURLs(p *parsed) []string {
	var urls []string
	for _, op := range p.operands {
		urls = append(urls, op.value)
	}
	return append(urls, p.values("--url")...)
}

func postCurl(p *parsed) {
	for _, v := range curlURLs(p) {
		checkURL(p, v)
		// curl expands [a-z] and {a,b} before it looks at the scheme:
		// "fil[e-e]:/etc/shadow" is a file: URL. A URL that can glob must
		// name its scheme literally.
		l := strings.ToLower(v)
		if !p.has("-g") && strings.ContainsAny(v, "[]{}") && !strings.HasPrefix(l, "http://") && !strings.HasPrefix(l, "https://") {
			p.deny(RiskHigh, "curl %s: a URL with [..] or {..} globs is expanded before its scheme is known; start it with http:// or https://, or pass -g", clip(v))
		}
	}
	for _, u := range p.opts {
		n := u.opt.names[0]
		switch {
		case n == "-d" || n == "--data-binary" || n == "--data-urlencode" || n == "--json":
			v := u.value
			if n == "--data-urlencode" {
				if i := strings.IndexAny(v, "@="); i >= 0 && v[i] == '@' {
					v = v[i:]
				}
			}
			if strings.HasPrefix(v, "@") && v != "@-" {
				p.paths = append(p.paths, operand{value: v[1:], kind: KPathRead})
			}
		case n == "-F":
			curlFormFiles(p, u.value)
		case n == "-T" && !p.has("-g") && strings.ContainsAny(u.value, "[]{}"):
			// curl expands globs in -T names too: {f,/etc/shadow}.
			p.deny(RiskHigh, "curl -T %s: a [..] or {..} glob names files that are not checked; name one file, or pass -g", clip(u.value))
		case n == "-w" && strings.Contains(u.value, "%output{"):
			// curl 8.3+: -w '%output{FILE}' writes the rest of the format there.
			p.deny(RiskHigh, "curl -w %%output{...} writes to a file that is not checked")
		case n == "-H" || n == "-w":
			// -H @FILE reads headers from a file (and sends them);
			// -w @FILE reads the output format from a file (and prints it).
			if strings.HasPrefix(u.value, "@") && u.value != "@-" {
				p.paths = append(p.paths, operand{value: u.value[1:], kind: KPathRead})
			}
		case n == "-b":
			// a cookie argument without '=' is a cookie file to read
			if !strings.Contains(u.value, "=") && u.value != "-" {
				p.paths = append(p.paths, operand{value: u.value, kind: KPathRead})
			}
		case n == "--variable":
			if i := strings.IndexAny(u.value, "=@"); i >= 0 && u.value[i] == '@' && u.value[i+1:] != "-" {
				p.paths = append(p.paths, operand{value: u.value[i+1:], kind: KPathRead})
			}
		}
	}
	urls := curlURLs(p)
	writes := p.has("-O", "--remote-name-all") || len(p.values("-o")) > 0
	if writes && !p.has("-g") {
		for _, u := range urls {
			if strings.ContainsAny(u, "{[") {
				p.deny(RiskHigh, "%s: URL globbing ({...} or [...]) chooses output file names that are not checked; add --globoff", p.tool)
				break
			}
		}
	}
	if p.has("-J") {
		p.deny(RiskHigh, "%s -J: the server chooses the output file name (not checked)", p.tool)
	}
	if p.has("-O", "--remote-name-all") {
		p.write = true
		dir := ""
		if v := p.values("--output-dir"); len(v) > 0 {
			dir = strings.TrimRight(v[len(v)-1], "/") + "/"
		}
		for _, u := range urls {
			if name := urlFileName(u, ""); name != "" {
				p.paths = append(p.paths, operand{value: dir + name, kind: KPathWrite})
			}
		}
	}
	if dirs := p.values("--output-dir"); len(dirs) > 0 {
		// -o NAME is relative to --output-dir
		d := strings.TrimRight(dirs[len(dirs)-1], "/") + "/"
		for _, o := range p.values("-o") {
			if o != "-" && !strings.HasPrefix(o, "/") {
				p.paths = append(p.paths, operand{value: d + o, kind: KPathWrite})
			}
		}
	}
	dropOutputSinks(p, "-o")
	for _, op := range p.paths {
		if op.kind == KPathWrite {
			p.write = true
		}
	}
	p.loopback = loopbackOnly(p, urls, !p.has("-g"), curlElsewhere...)
}

// dropOutputSinks forgets the output option values that name no file: "-"
// (standard output) and /dev/null (which every sandbox profile may write),
// so `curl -s -o /dev/null -w '%{http_code}' URL` and `wget -qO- URL` write
// nothing. It reports whether every value of the option was one.
func dropOutputSinks(p *parsed, name string) bool {
	all := true
	p.paths = slices.DeleteFunc(p.paths, func(op operand) bool {
		if op.from == nil || op.from.names[0] != name {
			return false
		}
		sink := op.value == "-" || op.value == "/dev/null"
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
func loopbackOnly(p *parsed, urls []string, globs bool, elsewhere ...string) bool {
	if len(urls) == 0 || p.has(elsewhere...) {
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
func curlFormFiles(p *parsed, v string) {
	_, val, ok := strings.Cut(v, "=")
	if !ok {
		return
	}
	parts := strings.Split(val, ";")
	add := func(f string) {
		if strings.ContainsAny(f, "\"\\") {
			p.deny(RiskHigh, "%s -F: quoted or escaped file names are not checked", p.tool)
			return
		}
		for _, one := range strings.Split(f, ",") {
			if one != "" && one != "-" {
				p.paths = append(p.paths, operand{value: one, kind: KPathRead})
			}
		}
	}
	if strings.HasPrefix(parts[0], "@") || strings.HasPrefix(parts[0], "<") {
		if strings.Contains(val, "\"") {
			p.deny(RiskHigh, "%s -F: quoted or escaped file names are not checked", p.tool)
			return
		}
		add(parts[0][1:])
	}
	for _, prm := range parts[1:] {
		if strings.Contains(prm, ",") {
			// "@f;type=text/plain,/other" is a second file to curl.
			p.deny(RiskHigh, "%s -F: a ',' after ';' names more files, which are not checked", p.tool)
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

func postWget(p *parsed) {
	var urls []string
	for _, op := range p.operands {
		checkURL(p, op.value)
		urls = append(urls, op.value)
	}
	p.loopback = loopbackOnly(p, urls, false)
	if sinks := dropOutputSinks(p, "-O"); p.has("--spider") || len(p.values("-O")) > 0 && sinks {
		p.write = false
	}
	for _, o := range []string{"-r", "-m", "-p"} {
		if p.has(o) {
			p.deny(RiskHigh, "wget %s: recursive retrieval writes files and directories named by the server (not checked)", o)
		}
	}
	if p.has("--content-disposition") {
		p.deny(RiskHigh, "wget --content-disposition: the server chooses the output file name (not checked)")
	}
	if p.has("-i") {
		p.deny(RiskHigh, "wget -i: the URLs (and so the output file names) in the list are not checked")
	}
	for _, v := range p.values("--restrict-file-names") {
		if l := strings.ToLower(v); strings.Contains(l, "lowercase") || strings.Contains(l, "uppercase") {
			p.deny(RiskHigh, "wget --restrict-file-names=%s: changes the case of saved names (\".GIT/CONFIG\" becomes .git/config), which is not checked", clip(v))
		}
	}
	if p.has("--cut-dirs") {
		p.deny(RiskHigh, "wget --cut-dirs: the directories the saved file lands in are not checked")
	}
	if len(p.values("-O")) > 0 || p.has("--spider") {
		return
	}
	// Default output: the URL's last path segment (index.html for a
	// directory), under -P DIR, or HOST/PATH with -x.
	dir := ""
	if v := p.values("-P"); len(v) > 0 {
		dir = strings.TrimRight(v[len(v)-1], "/") + "/"
	}
	for _, op := range p.operands {
		name := urlFileName(op.value, "index.html")
		if p.has("-x") {
			rest := op.value
			if i := strings.Index(rest, "://"); i >= 0 {
				rest = rest[i+3:]
			}
			if i := strings.LastIndexByte(rest, '/'); i >= 0 {
				name = rest[:i+1] + name
			} else {
				name = rest + "/" + name
			}
			if p.has("--no-host-directories") {
				// -nH: PATH without the HOST/ directory.
				if i := strings.IndexByte(name, '/'); i >= 0 {
					name = name[i+1:]
				}
			}
		}
		p.paths = append(p.paths, operand{value: dir + name, kind: KPathWrite})
		// wget decodes %XX in the names it saves ("%2Eenvrc" is ".envrc"):
		// the decoded name is checked too.
		if dec, err := url.PathUnescape(dir + name); err != nil {
			p.deny(RiskHigh, "wget %s: the output file name has a malformed %%-escape (not checked)", clip(op.value))
		} else if dec != dir+name {
			p.paths = append(p.paths, operand{value: dec, kind: KPathWrite})
		}
	}
}
