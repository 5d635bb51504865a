// Command probe runs in the pods of kubetest's Services test (standard
// library only, built by the test into an image of its own):
//
//	probe serve ADDR      answers every HTTP request with the pod's host name
//	probe fetch URL N     GETs URL on new connections until N different host
//	                      names answered (at most a minute), then prints
//	                      them as a JSON list
//	probe whoami          asks the API server, through the in-cluster
//	                      kubernetes Service (KUBERNETES_SERVICE_HOST and
//	                      _PORT), who its ServiceAccount token is, verifying
//	                      the server by the mounted ca.crt, and prints the
//	                      user name
//	probe pg DSN          connects to PostgreSQL at DSN and prints the client
//	                      address the server saw
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	switch {
	case len(args) == 2 && args[0] == "serve":
		host, _ := os.Hostname()
		return http.ListenAndServe(args[1], http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, host)
		}))
	case len(args) == 3 && args[0] == "fetch":
		n, err := strconv.Atoi(args[2])
		if err != nil {
			return err
		}
		return fetch(args[1], n)
	case len(args) == 1 && args[0] == "whoami":
		return whoami()
	case len(args) == 2 && args[0] == "pg":
		return pg(args[1])
	}
	return fmt.Errorf("usage: probe serve ADDR | fetch URL N | whoami | pg DSN (got %q)", args)
}

func fetch(url string, n int) error {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	seen := map[string]bool{}
	deadline := time.Now().Add(time.Minute)
	var lastErr error
	for len(seen) < n && time.Now().Before(deadline) {
		resp, err := hc.Get(url)
		if err != nil {
			lastErr = err
			time.Sleep(200 * time.Millisecond)
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			lastErr = fmt.Errorf("GET %s: %s %v", url, resp.Status, err)
			continue
		}
		seen[string(b)] = true
	}
	names := make([]string, 0, len(seen))
	for h := range seen {
		names = append(names, h)
	}
	sort.Strings(names)
	out, _ := json.Marshal(names)
	fmt.Println(string(out))
	if len(seen) < n {
		return fmt.Errorf("%d of %d host names answered at %s (last error: %v)", len(seen), n, url, lastErr)
	}
	return nil
}

func whoami() error {
	token, err := os.ReadFile(saDir + "/token")
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return fmt.Errorf("no certificate in %s/ca.crt", saDir)
	}
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return fmt.Errorf("no KUBERNETES_SERVICE_HOST or KUBERNETES_SERVICE_PORT in the environment")
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	body := []byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
	req, err := http.NewRequest(http.MethodPost, "https://"+net.JoinHostPort(host, port)+"/apis/authentication.k8s.io/v1/selfsubjectreviews", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+string(bytes.TrimSpace(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("selfsubjectreviews: %s: %s", resp.Status, b)
	}
	var review struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal(b, &review); err != nil {
		return fmt.Errorf("selfsubjectreviews: %w: %s", err, b)
	}
	fmt.Println(review.Status.UserInfo.Username)
	return nil
}

func pg(dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var addr string
	if err := conn.QueryRow(ctx, "SELECT host(inet_client_addr())").Scan(&addr); err != nil {
		return err
	}
	fmt.Println(addr)
	return nil
}
