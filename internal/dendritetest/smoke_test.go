package dendritetest

import "testing"

func TestMain(m *testing.M) { Main(m) }

func TestStartsAndRegisters(t *testing.T) {
	s := Start(t)
	c := s.Register(t, "alice")
	if c.UserID == "" || c.AccessToken == "" {
		t.Fatalf("registered without credentials: %+v", c)
	}
}
