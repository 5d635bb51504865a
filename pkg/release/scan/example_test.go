package scan_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/slipway-dev/slipway/pkg/release/scan"
)

// Scrub a built rootfs, scan it, and allow what the template means to ship.
func Example() {
	root, err := os.MkdirTemp("", "rootfs")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	for name, content := range map[string]string{
		"root/.bash_history": "make install\n",
		"etc/machine-id":     "0123456789abcdef0123456789abcdef\n",
		"tmp/build.log":      "ok\n",
		// The password is assembled so this file holds no literal credential.
		"opt/app/app.env": "DATABASE_URL=postgres://app:" + "hunter2" + "-xyzzy" + "@db:5432/app\n",
	} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			log.Fatal(err)
		}
	}

	scrubbed, err := scan.Scrub(root, nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range scrubbed.Entries {
		fmt.Println(e.Action, e.Path, e.Rule)
	}

	ctx := context.Background()
	rep, err := scan.Scan(ctx, root)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rep.Err())

	allow, err := scan.ParseAllow("url-password:/opt/app/*.env")
	if err != nil {
		log.Fatal(err)
	}
	rep, err = scan.Scan(ctx, root, scan.WithAllow(allow))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rep.Err(), rep.Allowed[0].Path, rep.Allowed[0].AllowedBy)
	// Output:
	// emptied /etc/machine-id machine-id
	// removed /root/.bash_history shell-history
	// removed /tmp/build.log tmp
	// security scan findings (1):
	// /opt/app/app.env:1: url-password
	// <nil> /opt/app/app.env url-password:/opt/app/*.env
}
