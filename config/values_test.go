package config

import (
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	t.Parallel()
	good := map[string]time.Duration{"10m": 10 * time.Minute, "1h": time.Hour, " 1h30m ": 90 * time.Minute, "0s": 0, "250ms": 250 * time.Millisecond}
	for in, want := range good {
		var d Duration
		if err := d.UnmarshalText([]byte(in)); err != nil || d.D() != want {
			t.Errorf("Duration(%q) = %v, %v; want %v", in, d, err, want)
		}
	}
	bad := map[string]string{"10": "needs a unit", "ten minutes": "invalid duration", "-1m": "must not be negative", "": "invalid duration"}
	for in, want := range bad {
		var d Duration
		if err := d.UnmarshalText([]byte(in)); err == nil || !containsStr(err.Error(), want) {
			t.Errorf("Duration(%q) err = %v, want %q", in, err, want)
		}
	}
	if b, _ := Duration(90 * time.Second).MarshalText(); string(b) != "1m30s" {
		t.Errorf("MarshalText = %s", b)
	}
}

func TestByteSize(t *testing.T) {
	t.Parallel()
	good := map[string]ByteSize{"64KiB": 64 << 10, "1MiB": 1 << 20, "2GiB": 2 << 30, "4096": 4096, "10B": 10, "1KB": 1000, "3 MB": 3e6, "1GB": 1e9}
	for in, want := range good {
		var b ByteSize
		if err := b.UnmarshalText([]byte(in)); err != nil || b != want {
			t.Errorf("ByteSize(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "KiB", "-1", "1.5MiB", "64kib", "1TiB", "99999999999GiB"} {
		var b ByteSize
		if err := b.UnmarshalText([]byte(in)); err == nil {
			t.Errorf("ByteSize(%q) = %d, want error", in, b)
		}
	}
	for in, want := range map[ByteSize]string{64 << 10: "64KiB", 1 << 20: "1MiB", 3 << 30: "3GiB", 1000: "1000", 0: "0"} {
		if got := in.String(); got != want {
			t.Errorf("ByteSize(%d).String() = %q, want %q", int64(in), got, want)
		}
	}
}

func TestRate(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		events    int
		per       time.Duration
		perSecond float64
		interval  time.Duration
		str       string
	}{
		"1/s":  {1, time.Second, 1, time.Second, "1/s"},
		"20/m": {20, time.Minute, 20.0 / 60, 3 * time.Second, "20/m"},
		"5/5s": {5, 5 * time.Second, 1, time.Second, "5/5s"},
		"30/s": {30, time.Second, 30, time.Second / 30, "30/s"},
		"60/h": {60, time.Hour, 1.0 / 60, time.Minute, "60/h"},
	}
	for in, want := range cases {
		var r Rate
		if err := r.UnmarshalText([]byte(in)); err != nil {
			t.Errorf("Rate(%q): %v", in, err)
			continue
		}
		if r.Events != want.events || r.Per != want.per || r.PerSecond() != want.perSecond || r.Interval() != want.interval || r.String() != want.str {
			t.Errorf("Rate(%q) = %+v (%v/s, every %v, %q), want %+v", in, r, r.PerSecond(), r.Interval(), r.String(), want)
		}
	}
	for _, in := range []string{"", "5", "0/s", "-1/s", "x/s", "5/", "5/x", "5/-1s", "5/0s"} {
		var r Rate
		if err := r.UnmarshalText([]byte(in)); err == nil {
			t.Errorf("Rate(%q) = %+v, want error", in, r)
		}
	}
	var zero Rate
	if !zero.IsZero() || zero.PerSecond() != 0 || zero.Interval() != 0 || zero.String() != "" {
		t.Error("zero Rate is not unset")
	}
}

func TestRateLimitEffectiveBurst(t *testing.T) {
	t.Parallel()
	l := RateLimit{Rate: Rate{Events: 20, Per: time.Minute}}
	if l.EffectiveBurst() != 20 {
		t.Errorf("default burst = %d, want 20", l.EffectiveBurst())
	}
	l.Burst = 3
	if l.EffectiveBurst() != 3 {
		t.Errorf("explicit burst = %d, want 3", l.EffectiveBurst())
	}
	if !(RateLimit{}).IsZero() || l.IsZero() {
		t.Error("IsZero wrong")
	}
}

func TestExpandEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{"A": "alpha", "EMPTY": "", "N_1": "one"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	good := map[string]string{
		"plain":             "plain",
		"${A}":              "alpha",
		"x-${A}-${N_1}":     "x-alpha-one",
		"${MISSING:-dflt}":  "dflt",
		"${EMPTY:-dflt}":    "dflt",
		"${EMPTY}":          "",
		"${MISSING:-}":      "",
		"^[a-z]+$":          "^[a-z]+$",
		"$A and $":          "$A and $",
		"$${A}":             "${A}",
		"${A:-with:-colon}": "alpha",
		"${MISSING:-a:-b}":  "a:-b",
		"pre ${A}${A} post": "pre alphaalpha post",
	}
	for in, want := range good {
		got, err := expandEnv(in, lookup)
		if err != nil || got != want {
			t.Errorf("expandEnv(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	bad := map[string]string{
		"${MISSING}":  "MISSING is not set",
		"${A":         "unterminated",
		"${}":         "invalid environment variable name",
		"${1A}":       "invalid environment variable name",
		"${A B}":      "invalid environment variable name",
		"ok ${NOPE} ": "NOPE is not set",
	}
	for in, want := range bad {
		_, err := expandEnv(in, lookup)
		if err == nil || !containsStr(err.Error(), want) {
			t.Errorf("expandEnv(%q) err = %v, want %q", in, err, want)
		}
	}
}
