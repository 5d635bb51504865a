package jobs

import (
	"time"
)

func tp(t time.Time) *time.Time { t = t.UTC(); return &t }
