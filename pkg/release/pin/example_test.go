package pin_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/slipway-dev/slipway/pkg/ref"
	"github.com/slipway-dev/slipway/pkg/release/pin"
	"github.com/slipway-dev/slipway/pkg/release/resolve"
)

// Lint a tree, pin it, and lint it again. The resolver here is a table; in
// use it is a registry resolver from package resolve.
func Example() {
	dir, err := os.MkdirTemp("", "pin-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "deploy.yaml")
	err = os.WriteFile(file, []byte(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      containers:
      - name: web
        image: nginx:1.25   # the front end
        imagePullPolicy: Always
`), 0o644)
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	tree, err := pin.Find(ctx, []string{dir})
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range pin.Lint(tree) {
		fmt.Println(strings.TrimPrefix(f.String(), dir+string(filepath.Separator)))
	}

	digests := map[string]string{"nginx:1.25": "sha256:" + strings.Repeat("ab", 32)}
	r := resolve.Func(func(ctx context.Context, r ref.Reference) (ref.Pin, error) {
		d, ok := digests[r.String()]
		if !ok {
			return ref.Pin{}, fmt.Errorf("%w: %s", resolve.ErrNotFound, r)
		}
		return ref.PinOf(r, d, ref.Origin{Source: ref.SourceRegistry, Registry: r.Registry()}), nil
	})
	res, err := pin.Plan(ctx, tree, r)
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range res.Changes() {
		fmt.Printf("%s: %s -> %s\n", c.Path, c.From, c.To)
	}
	if err := res.Write(); err != nil {
		log.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(b))

	tree, err = pin.Find(ctx, []string{dir})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("findings after pinning:", len(pin.Lint(tree)))
	// Output:
	// deploy.yaml:10:16: nginx:1.25: tag without digest: imagePullPolicy Always is no fix, it only asks for the tag again, which may return different bytes; pin by digest
	// spec.template.spec.containers[0].image: nginx:1.25 -> nginx:1.25@sha256:abababababababababababababababababababababababababababababababab
	// apiVersion: apps/v1
	// kind: Deployment
	// metadata:
	//   name: web
	// spec:
	//   template:
	//     spec:
	//       containers:
	//       - name: web
	//         image: nginx:1.25@sha256:abababababababababababababababababababababababababababababababab   # the front end
	//         imagePullPolicy: Always
	// findings after pinning: 0
}
