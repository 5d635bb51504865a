package sbom_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/slipway-dev/slipway/pkg/release/sbom"
)

func ExampleGenerate() {
	// a tiny root filesystem: a Debian dpkg database and one npm package
	root, err := os.MkdirTemp("", "rootfs-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	files := map[string]string{
		"etc/os-release": "ID=debian\nVERSION_ID=\"12\"\n",
		"var/lib/dpkg/status": "Package: openssl\nStatus: install ok installed\nArchitecture: amd64\n" +
			"Version: 3.0.7-1\n\n",
		"usr/lib/node_modules/left-pad/package.json": `{"name": "left-pad", "version": "1.3.0"}`,
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			log.Fatal(err)
		}
	}

	s, err := sbom.Generate(context.Background(), root,
		sbom.WithDocumentName("example"),
		sbom.WithCreated(time.Unix(1714564800, 0)), // SOURCE_DATE_EPOCH, read by the caller
	)
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range s.Packages() {
		fmt.Println(p.Type, p.Name, p.Version, p.PURL)
	}
	// Output:
	// npm left-pad 1.3.0 pkg:npm/left-pad@1.3.0
	// deb openssl 3.0.7-1 pkg:deb/debian/openssl@3.0.7-1?arch=amd64&distro=debian-12
}
