package secretfile_test

import (
	"errors"
	"fmt"

	"github.com/slipway-dev/slipway/internal/secretfile"
)

func ExampleMounts_Read() {
	m, err := secretfile.ParseMounts("/var/run/slipway/db=slipway-db")
	if err != nil {
		panic(err)
	}
	_, err = m.Read("/var/run/slipway/db/dsn")
	fmt.Println(err)
	fmt.Println(errors.Is(err, secretfile.ErrMissing))
	// Output:
	// file /var/run/slipway/db/dsn (Secret slipway-db, key dsn) does not exist: the Secret is not created, or has no such key
	// true
}
