package gateway

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// DefaultHostName names the one daemon of a gateway started with --socket
// only (no --daemon, no --fleet).
const DefaultHostName = "local"

// Host is one termd daemon the gateway serves, under a name that appears in
// its routes (/v1/hosts/NAME/...), in the fleet queue and on merged events.
type Host struct {
	Name string
	// Target is a unix socket path, or HOST:PORT for termd's mutual-TLS
	// listener.
	Target string
	// TLS holds the gateway's client certificate for a HOST:PORT target.
	TLS HostTLS
}

// HostTLS is the gateway's side of a mutual-TLS connection to one daemon:
// its client certificate and key, the CA that signed the daemon's
// certificate, and the name to verify it by (default: the target's host).
type HostTLS struct {
	Cert       string `yaml:"cert"`
	Key        string `yaml:"key"`
	CA         string `yaml:"ca"`
	ServerName string `yaml:"server_name"`
}

// IsTCP reports whether the host is reached over TCP (mutual TLS) rather
// than a unix socket.
func (h Host) IsTCP() bool { return !isSocketTarget(h.Target) }

var hostNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// CheckHostName refuses names that cannot stand in a URL path segment or in
// an event-stream cursor unchanged.
func CheckHostName(name string) error {
	if !hostNameRE.MatchString(name) {
		return fmt.Errorf("host name %q: use 1 to 63 lowercase letters, digits and '-', starting and ending with a letter or digit (it appears in /v1/hosts/NAME/ routes)", name)
	}
	return nil
}

// isSocketTarget: "unix:PATH", an absolute path, or one starting with ".";
// anything else is HOST:PORT or tls://HOST:PORT.
func isSocketTarget(t string) bool {
	return strings.HasPrefix(t, "unix:") || strings.HasPrefix(t, "/") || strings.HasPrefix(t, ".")
}

// checkTarget returns the target in its dialled form: an absolute socket
// path, or HOST:PORT.
func checkTarget(name, t string) (string, error) {
	if t == "" {
		return "", fmt.Errorf("host %q has no address: give a unix socket path or HOST:PORT of termd's TLS listener", name)
	}
	if isSocketTarget(t) {
		p := strings.TrimPrefix(strings.TrimPrefix(t, "unix://"), "unix:")
		if p == "" {
			return "", fmt.Errorf("host %q: %q names no socket path", name, t)
		}
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		return p, nil
	}
	t = strings.TrimPrefix(t, "tls://")
	h, port, err := net.SplitHostPort(t)
	if n, perr := strconv.Atoi(port); err != nil || h == "" || perr != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("host %q: address %q is neither a unix socket path (absolute, ./relative or unix:PATH) nor HOST:PORT (or tls://HOST:PORT) of termd's TLS listener", name, t)
	}
	return t, nil
}

// ParseDaemonFlag parses one --daemon NAME=TARGET.
func ParseDaemonFlag(v string) (Host, error) {
	name, target, ok := strings.Cut(v, "=")
	if !ok {
		return Host{}, fmt.Errorf("--daemon %q: write NAME=TARGET, e.g. --daemon build1=/run/termd/termd.sock or --daemon build2=10.0.0.2:7443", v)
	}
	name = strings.TrimSpace(name)
	if err := CheckHostName(name); err != nil {
		return Host{}, fmt.Errorf("--daemon %q: %w", v, err)
	}
	t, err := checkTarget(name, strings.TrimSpace(target))
	if err != nil {
		return Host{}, fmt.Errorf("--daemon %q: %w", v, err)
	}
	return Host{Name: name, Target: t}, nil
}

// FleetFile is the --fleet YAML file: the daemons the gateway serves.
//
//	tls:                 # the gateway's client certificate for every TCP host
//	  cert: /etc/termd-gateway/client.crt
//	  key: /etc/termd-gateway/client.key
//	  ca: /etc/termd-gateway/fleet-ca.crt
//	default_host: build1 # unprefixed /v1/ routes go here (default: the first host)
//	hosts:
//	  - name: build1
//	    address: 10.0.0.1:7443
//	  - name: laptop
//	    address: /run/termd/termd.sock
//	  - name: ci
//	    address: ci.internal:7443
//	    tls: {server_name: termd.ci.internal}   # per-host fields override tls:
type FleetFile struct {
	TLS         HostTLS `yaml:"tls"`
	DefaultHost string  `yaml:"default_host"`
	Hosts       []struct {
		Name    string  `yaml:"name"`
		Address string  `yaml:"address"`
		TLS     HostTLS `yaml:"tls"`
	} `yaml:"hosts"`
}

// LoadFleetFile reads a fleet file; unknown keys are refused.
func LoadFleetFile(path string) (*FleetFile, error) {
	ff, err := loadStrictYAML[FleetFile]("fleet file", path)
	if err != nil {
		return nil, err
	}
	if len(ff.Hosts) == 0 {
		return nil, fmt.Errorf("fleet file %s lists no hosts: add hosts: [{name: NAME, address: SOCKET or HOST:PORT}]", path)
	}
	return ff, nil
}

// FleetHosts builds the host list from --daemon flags, a fleet file (may be
// nil) and the flags' default TLS files: per-host tls fields win over the
// fleet file's tls:, which wins over the flags. Names must be unique across
// flags and file; every TCP host needs a certificate, key and CA.
func FleetHosts(daemons []Host, ff *FleetFile, flagTLS HostTLS) ([]Host, error) {
	var hosts []Host
	for _, d := range daemons {
		d.TLS = flagTLS
		hosts = append(hosts, d)
	}
	if ff != nil {
		base := mergeTLS(ff.TLS, flagTLS)
		for i, fh := range ff.Hosts {
			if err := CheckHostName(fh.Name); err != nil {
				return nil, fmt.Errorf("fleet file hosts[%d]: %w", i, err)
			}
			t, err := checkTarget(fh.Name, fh.Address)
			if err != nil {
				return nil, fmt.Errorf("fleet file hosts[%d]: %w", i, err)
			}
			hosts = append(hosts, Host{Name: fh.Name, Target: t, TLS: mergeTLS(fh.TLS, base)})
		}
	}
	seen := map[string]bool{}
	for _, h := range hosts {
		if seen[h.Name] {
			return nil, fmt.Errorf("host name %q is given twice (--daemon flags and fleet file hosts share one list of names)", h.Name)
		}
		seen[h.Name] = true
		if !h.IsTCP() {
			continue
		}
		if h.TLS.Cert == "" || h.TLS.Key == "" || h.TLS.CA == "" {
			return nil, fmt.Errorf("host %q (%s) is reached over TCP with mutual TLS: give the gateway's client certificate, key and the fleet CA (--client-cert, --client-key, --client-ca, or tls: {cert, key, ca} in the fleet file)", h.Name, h.Target)
		}
		for _, f := range []string{h.TLS.Cert, h.TLS.Key, h.TLS.CA} {
			if _, err := os.Stat(f); err != nil {
				return nil, fmt.Errorf("host %q: %w", h.Name, err)
			}
		}
	}
	return hosts, nil
}

func mergeTLS(over, base HostTLS) HostTLS {
	pick := func(a, b string) string {
		if a != "" {
			return a
		}
		return b
	}
	return HostTLS{Cert: pick(over.Cert, base.Cert), Key: pick(over.Key, base.Key), CA: pick(over.CA, base.CA), ServerName: pick(over.ServerName, base.ServerName)}
}
