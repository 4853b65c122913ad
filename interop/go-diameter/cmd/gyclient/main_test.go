package main

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
	"github.com/fiorix/go-diameter/v4/diam/dict"
	"github.com/fiorix/go-diameter/v4/diam/sm"

	"gyro.test/interop/internal/ccserver"
)

// startServer runs gyserver's handlers on a loopback port and returns its
// address.
func startServer(t *testing.T) (string, *ccserver.Server) {
	t.Helper()
	settings := &sm.Settings{
		OriginHost:  datatype.DiameterIdentity("gyserver.gyro.test"),
		OriginRealm: datatype.DiameterIdentity("gyro.test"),
		VendorID:    vendor3GPP,
		ProductName: "gyserver",
	}
	s := ccserver.New(settings, 1000000, 3600)
	mux := sm.New(settings)
	s.Register(mux)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &diam.Server{Handler: mux, Dict: dict.Default}
	go srv.Serve(l)
	t.Cleanup(func() { l.Close() })
	return l.Addr().String(), s
}

func testOptions(addr string) *options {
	return &options{
		addr:           addr,
		originHost:     "gyclient.gyro.test",
		originRealm:    "gyro.test",
		destRealm:      "gyro.test",
		msisdn:         "46700000001",
		ratingGroups:   []uint32{10, 20},
		dataContext:    "32251@3gpp.org",
		smsContext:     "32274@3gpp.org",
		event:          true,
		unknownMSISDN:  "46799999999",
		unknownContext: "99999@3gpp.org",
		expectResult:   2001,
		timeout:        5 * time.Second,
	}
}

func TestFullRunAgainstGyserverPassesEveryCheck(t *testing.T) {
	addr, s := startServer(t)
	c := &client{opt: testOptions(addr)}
	if err := c.run(); err != nil {
		t.Fatalf("run failed after %d checks: %v", c.passed, err)
	}
	if c.passed != 7 {
		t.Errorf("passed %d checks, want 7", c.passed)
	}
	if got := s.Answered(); got != 4 {
		t.Errorf("server answered %d CCRs, want 4", got)
	}
}

func TestNegativeModeFailsAgainstAServerThatGrantsEverything(t *testing.T) {
	addr, _ := startServer(t)
	o := testOptions(addr)
	o.negative = true
	c := &client{opt: o}
	err := c.run()
	var se *stepError
	if !errors.As(err, &se) {
		t.Fatalf("want a step error, got %v", err)
	}
	if se.step != "CCR-I unknown subscriber" || !strings.Contains(se.err.Error(), "Result-Code 2001, want 5030") {
		t.Errorf("unexpected failure: %v", err)
	}
	c.conn.Close()
}

func TestExpectedErrorCodeMismatchIsReported(t *testing.T) {
	addr, _ := startServer(t)
	o := testOptions(addr)
	o.expectResult = 4012
	c := &client{opt: o}
	err := c.run()
	if err == nil || !strings.Contains(err.Error(), "CCR-I: Result-Code 2001, want 4012") {
		t.Fatalf("unexpected result: %v", err)
	}
	c.conn.Close()
}

func TestUnreachableServerFailsTheHandshakeStep(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	o := testOptions(addr)
	o.timeout = time.Second
	c := &client{opt: o}
	err = c.run()
	if err == nil || !strings.HasPrefix(err.Error(), "CER/CEA: ") {
		t.Fatalf("unexpected result: %v", err)
	}
}
