package control

import (
	"time"
)

func tp(t time.Time) *time.Time { t = t.UTC(); return &t }
