package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written as Go duration text ("10m", "1h30m").
// It exists because YAML has no duration type and bare integers are
// ambiguous (seconds? nanoseconds?), so they are rejected.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalText parses "10m"; negative durations are rejected.
func (d *Duration) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	v, err := time.ParseDuration(s)
	if err != nil {
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			return fmt.Errorf("duration %q needs a unit, e.g. %ss or %sm", s, s, s)
		}
		return fmt.Errorf("invalid duration %q (want e.g. 30s, 10m, 1h)", s)
	}
	if v < 0 {
		return fmt.Errorf("duration %q must not be negative", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalText formats like time.Duration, so configs round-trip.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Quorum is a rule's quorum: a whole number (N), or a CEL expression that
// gives one (Expr), as in quorum: 'args.env == "prod-eu" ? 2 : 1'.
type Quorum struct {
	N    int
	Expr string
}

// UnmarshalText reads a whole number as N and anything else as Expr
// (config check compiles it).
func (q *Quorum) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	if n, err := strconv.Atoi(s); err == nil {
		*q = Quorum{N: n}
		return nil
	}
	*q = Quorum{Expr: s}
	return nil
}

// MarshalText writes N or Expr, so configs round-trip.
func (q Quorum) MarshalText() ([]byte, error) {
	if q.Expr != "" {
		return []byte(q.Expr), nil
	}
	return []byte(strconv.Itoa(q.N)), nil
}

// ByteSize is a size in bytes written as a plain integer or with a unit:
// B, KiB, MiB, GiB (powers of 1024) or KB, MB, GB (powers of 1000).
type ByteSize int64

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	// Longest suffixes first so "KiB" is not read as "B".
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000},
	{"B", 1},
}

// UnmarshalText parses "64KiB", "1MiB", "4096".
func (b *ByteSize) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	num, mult := s, int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("invalid size %q (want e.g. 4096, 64KiB, 1MiB)", s)
	}
	if n > math.MaxInt64/mult {
		return fmt.Errorf("size %q is too large", s)
	}
	*b = ByteSize(n * mult)
	return nil
}

// String formats with the largest binary unit that divides the value.
func (b ByteSize) String() string {
	switch {
	case b != 0 && b%(1<<30) == 0:
		return strconv.FormatInt(int64(b)>>30, 10) + "GiB"
	case b != 0 && b%(1<<20) == 0:
		return strconv.FormatInt(int64(b)>>20, 10) + "MiB"
	case b != 0 && b%(1<<10) == 0:
		return strconv.FormatInt(int64(b)>>10, 10) + "KiB"
	}
	return strconv.FormatInt(int64(b), 10)
}

// MarshalText formats like String, so configs round-trip.
func (b ByteSize) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// Rate is "N events per period", written "N/s", "N/m", "N/h" or with a
// multiplier "N/5s" (Discord's "5 per 5 seconds"). The zero Rate means
// "unset: use the platform default".
type Rate struct {
	Events int
	Per    time.Duration
}

var errRateSyntax = errors.New(`want "N/s", "N/m", "N/h" or "N/5s"`)

// UnmarshalText parses "20/m".
func (r *Rate) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	n, per, ok := strings.Cut(s, "/")
	if !ok {
		return fmt.Errorf("invalid rate %q: %w", s, errRateSyntax)
	}
	events, err := strconv.Atoi(strings.TrimSpace(n))
	if err != nil || events <= 0 {
		return fmt.Errorf("invalid rate %q: event count must be a positive integer", s)
	}
	per = strings.TrimSpace(per)
	var d time.Duration
	switch per {
	case "s":
		d = time.Second
	case "m":
		d = time.Minute
	case "h":
		d = time.Hour
	default:
		d, err = time.ParseDuration(per)
		if err != nil || d <= 0 {
			return fmt.Errorf("invalid rate %q: %w", s, errRateSyntax)
		}
	}
	*r = Rate{Events: events, Per: d}
	return nil
}

// IsZero reports an unset rate.
func (r Rate) IsZero() bool { return r.Events == 0 || r.Per == 0 }

// PerSecond returns events per second (golang.org/x/time/rate.Limit's unit).
func (r Rate) PerSecond() float64 {
	if r.IsZero() {
		return 0
	}
	return float64(r.Events) / r.Per.Seconds()
}

// Interval returns the steady-state time between two events.
func (r Rate) Interval() time.Duration {
	if r.IsZero() {
		return 0
	}
	return r.Per / time.Duration(r.Events)
}

// String formats as written: "20/m", "5/5s".
func (r Rate) String() string {
	if r.IsZero() {
		return ""
	}
	unit := r.Per.String()
	switch r.Per {
	case time.Second:
		unit = "s"
	case time.Minute:
		unit = "m"
	case time.Hour:
		unit = "h"
	}
	return strconv.Itoa(r.Events) + "/" + unit
}

// MarshalText formats like String, so configs round-trip.
func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// RateLimit is one token bucket.
type RateLimit struct {
	Rate Rate `yaml:"rate" cfg:"required"`
	// Burst is the bucket size; 0 means EffectiveBurst's default.
	Burst int `yaml:"burst"`
}

// IsZero reports an unset limit (use the platform default).
func (l RateLimit) IsZero() bool { return l.Rate.IsZero() }

// EffectiveBurst returns Burst, or when unset the rate's event count: a
// platform that allows "20/m" accepts 20 messages at once and then throttles.
func (l RateLimit) EffectiveBurst() int {
	if l.Burst > 0 {
		return l.Burst
	}
	return l.Rate.Events
}
