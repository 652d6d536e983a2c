package egress

import "sort"

// Env is the environment an execution with network egress:NAME gets for the
// proxy at addr (127.0.0.1:PORT inside its network namespace):
//
//   - HTTP_PROXY, HTTPS_PROXY and their lower-case forms: curl, wget, git
//     (libcurl), Go (GOPROXY and GOSUMDB stay proxy.golang.org and
//     sum.golang.org, reached through HTTPS_PROXY), pip, uv and cargo
//     honour them and do not resolve the destination themselves;
//   - npm_config_proxy and npm_config_https_proxy: npm (and yarn 1) take
//     their proxy from their config, which these set;
//   - NO_PROXY / no_proxy and npm_config_noproxy: loopback stays direct.
//
// Nothing here can widen what the execution reaches: the namespace has no
// route out, so a tool that ignores the proxy gets no network at all.
func Env(addr string) map[string]string {
	u := "http://" + addr
	const local = "localhost,127.0.0.1,::1"
	return map[string]string{
		"HTTP_PROXY": u, "HTTPS_PROXY": u, "http_proxy": u, "https_proxy": u,
		"NO_PROXY": local, "no_proxy": local,
		"npm_config_proxy": u, "npm_config_https_proxy": u, "npm_config_noproxy": local,
	}
}

// EnvNames are the variables Env sets, sorted.
func EnvNames() []string {
	var out []string
	for k := range Env("") {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
