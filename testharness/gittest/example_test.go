package gittest_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/slipway-dev/slipway/testharness/gittest"
)

// Run drives the git CLI with a fixed identity and no user or system
// configuration, so what it commits reads the same on every machine; its
// error carries the command and git's own message. In a test, NewServer(t)
// and Seed serve such repositories over smart HTTP.
func ExampleRun() {
	dir, err := os.MkdirTemp("", "gittest-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bare, work := filepath.Join(dir, "config.git"), filepath.Join(dir, "work")

	for _, args := range [][]string{
		{"init", "--quiet", "--bare", "--initial-branch=main", bare},
		{"clone", "--quiet", bare, work},
	} {
		if _, err := gittest.Run("", args...); err != nil {
			log.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(work, "pool.yaml"), []byte("kind: Pool\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	for _, args := range [][]string{
		{"add", "pool.yaml"},
		{"commit", "--quiet", "-m", "add pool"},
		{"push", "--quiet", "origin", "main"},
	} {
		if _, err := gittest.Run(work, args...); err != nil {
			log.Fatal(err)
		}
	}
	out, err := gittest.Run(bare, "log", "--format=%an <%ae> %s", "main")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out)
	out, _ = gittest.Run(bare, "show", "main:pool.yaml")
	fmt.Printf("%q\n", out) // trimmed

	_, err = gittest.Run(bare, "show", "main:absent.yaml")
	fmt.Println(strings.SplitN(err.Error(), "\n", 2)[0])
	// Output:
	// gittest <gittest@example.invalid> add pool
	// "kind: Pool"
	// git show main:absent.yaml: exit status 128
}

// Serve serves a program's own folder of bare repositories over smart
// HTTP, without a test: make demo-kube serves its config repository to a
// cluster's pods this way while its CLI writes the repository on disk.
func ExampleServe() {
	root, err := os.MkdirTemp("", "gittest-serve")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	work := filepath.Join(root, "work")
	for _, args := range [][]string{
		{"init", "--quiet", "--bare", "--initial-branch=main", filepath.Join(root, "config.git")},
		{"init", "--quiet", "--initial-branch=main", work},
	} {
		if _, err := gittest.Run("", args...); err != nil {
			log.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"commit", "--quiet", "--allow-empty", "-m", "first"},
		{"push", "--quiet", filepath.Join(root, "config.git"), "main"},
	} {
		if _, err := gittest.Run(work, args...); err != nil {
			log.Fatal(err)
		}
	}
	s, err := gittest.Serve(root)
	if err != nil {
		log.Fatal(err)
	}
	out, err := gittest.Run("", "ls-remote", "--heads", s.URL("config.git"))
	fmt.Println(strings.Fields(out)[1], err)
	s.Close()
	_, err = gittest.Run("", "ls-remote", "--heads", s.URL("config.git"))
	fmt.Println("after Close:", err != nil)
	// Output:
	// refs/heads/main <nil>
	// after Close: true
}
