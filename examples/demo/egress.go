package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// egressStep turns pool agents into an allow-list pool whose one approved
// destination is an HTTP server the demo starts on this host: a claim
// reaches it through the sandbox's egress proxy, is refused another port
// of the same host, and the run's manifest lists both attempts. It
// returns the run's id.
func (p *runtimeProc) egressStep(sh shell) (string, error) {
	ip, err := hostIPv4()
	if err != nil {
		return "", err
	}
	serve := func(body string) (string, func(), error) {
		ln, err := net.Listen("tcp4", net.JoinHostPort(ip, "0"))
		if err != nil {
			return "", nil, err
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, body) }),
			ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		return ln.Addr().String(), func() { srv.Close() }, nil
	}
	approved, stopA, err := serve("hello from the approved server\n")
	if err != nil {
		return "", err
	}
	defer stopA()
	other, stopO, err := serve("this answer must never reach the sandbox\n")
	if err != nil {
		return "", err
	}
	defer stopO()
	fmt.Printf("  the demo serves HTTP on %s (to be approved) and on %s (not approved)\n", approved, other)

	section("pool set", "network=allow-list with one approved destination: on this runtime, a per-sandbox egress proxy")
	if err := sh.run(0, "pool", "set", "--repo", "config.git", "--pool", "agents", "network=allow-list", "network.allow="+approved); err != nil {
		return "", err
	}
	if err := p.sync(); err != nil {
		return "", err
	}
	section("claim", "the allow-listed pool: the approved server answers through the proxy; another port is refused (403)")
	script := fmt.Sprintf(`echo "HTTP_PROXY=$HTTP_PROXY"; wget -q -O - http://%s/; `+
		`(printf 'GET http://%[2]s/ HTTP/1.1\r\nHost: %[2]s\r\n\r\n'; sleep 1) | nc -w 3 127.0.0.1 3128 | head -1`, approved, other)
	res, err := p.claim(sh, false, "sh", "-c", script)
	if err != nil {
		return "", err
	}
	if !strings.Contains(res.Output, "hello from the approved server") || !strings.Contains(res.Output, "403 Forbidden") {
		return "", fmt.Errorf("the allow-listed claim did not reach %s and get refused %s: %q", approved, other, res.Output)
	}
	section("runs show --egress", "every destination the run asked for: allowed or denied, by which entry or why, bytes each way")
	if err := sh.run(0, "runs", "show", res.RunID, "--egress", "--runtime", p.server, "--token-file", p.token); err != nil {
		return "", err
	}
	return res.RunID, nil
}

// sync asks the runtime to read the config repository now (POST /v1/sync).
func (p *runtimeProc) sync() error {
	tok, err := os.ReadFile(p.token)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, p.server+"/v1/sync", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("POST /v1/sync: %s: %s", resp.Status, b)
	}
	return nil
}

// hostIPv4 is a non-loopback IPv4 address of this host: a sandbox's
// 127.0.0.1 is its own.
func hostIPv4() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String(), nil
		}
	}
	return "", fmt.Errorf("this host has no non-loopback IPv4 address for the demo's HTTP server")
}
