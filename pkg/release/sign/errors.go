package sign

import (
	"errors"
	"fmt"
)

// Errors, in families: one errors.Is covers each class.
var (
	// ErrInput marks a request refused before any work: a reference that is
	// not a digest, a nil key, a missing or contradictory option.
	ErrInput = errors.New("sign: input refused")
	// ErrTlogChoice marks a call that did not choose how to deal with the
	// transparency log; today the only choice is WithOfflineNoTlog.
	ErrTlogChoice = fmt.Errorf("%w: no transparency log choice (use WithOfflineNoTlog)", ErrInput)
	// ErrKey marks a key that cannot be made or read: bad PEM, wrong
	// password. The password itself is never part of the message.
	ErrKey = errors.New("sign: key refused")
	// ErrVerification marks a signature check that failed: no signatures, a
	// signature by another key, a payload naming another digest.
	ErrVerification = errors.New("sign: verification failed")
	// ErrNoSignatures marks a digest with no signatures at all.
	ErrNoSignatures = fmt.Errorf("%w: no signatures", ErrVerification)
	// ErrRegistry marks a failure to read or write the registry.
	ErrRegistry = errors.New("sign: registry")
)
