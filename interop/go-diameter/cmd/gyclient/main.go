// Command gyclient is a Gy (3GPP TS 32.299 / RFC 8506) credit-control
// client built on github.com/fiorix/go-diameter. It behaves like a PGW and
// an SMS gateway talking to an online charging server, checks every answer
// it gets, and exits 0 only when every check passed.
//
// The run, in order:
//
//	CER/CEA     capabilities exchange (Auth-Application-Id 4 and
//	            Vendor-Specific-Application-Id {10415, 4})
//	CCR-I       data session start: MSCC for each rating group with an RSU
//	CCR-U       usage report: MSCC with USU (+Reporting-Reason
//	            QUOTA_EXHAUSTED) and a new RSU
//	CCR-T       session end: Termination-Cause DIAMETER_LOGOUT, final USU
//	DWR/DWA     device watchdog
//	CCR-E       SMS direct debit (Requested-Action DIRECT_DEBITING)
//	negative    with -negative: unknown subscriber (5030) and unknown
//	            Service-Context-Id (5031)
//	DPR/DPA     disconnect
//
// Each step prints one line starting with "ok", "skip" or "FAIL".
package main

import (
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
	"github.com/fiorix/go-diameter/v4/diam/dict"
	"github.com/fiorix/go-diameter/v4/diam/sm"
	"github.com/fiorix/go-diameter/v4/diam/sm/smpeer"
)

type options struct {
	addr           string
	originHost     string
	originRealm    string
	destRealm      string
	msisdn         string
	ratingGroups   []uint32
	rsuOctets      uint64
	usedOctets     uint64
	dataContext    string
	smsContext     string
	event          bool
	negative       bool
	unknownMSISDN  string
	unknownContext string
	expectResult   uint32
	timeout        time.Duration
	verbose        bool
}

func parseFlags() (*options, error) {
	o := &options{}
	var groups string
	var expect uint
	flag.StringVar(&o.addr, "addr", "127.0.0.1:3868", "credit-control server address (host:port)")
	flag.StringVar(&o.originHost, "origin-host", "gyclient.gyro.test", "our Origin-Host")
	flag.StringVar(&o.originRealm, "origin-realm", "gyro.test", "our Origin-Realm")
	flag.StringVar(&o.destRealm, "dest-realm", "gyro.test", "Destination-Realm of the CCRs")
	flag.StringVar(&o.msisdn, "msisdn", "46700000001", "subscriber MSISDN (Subscription-Id END_USER_E164)")
	flag.StringVar(&groups, "rating-groups", "10,20", "comma-separated rating groups of the data session")
	flag.Uint64Var(&o.rsuOctets, "rsu-octets", 0, "CC-Total-Octets asked for in each RSU (0: empty RSU, server's default quota)")
	flag.Uint64Var(&o.usedOctets, "used-octets", 0, "octets reported per rating group in CCR-U and CCR-T (0: the whole grant in CCR-U, half of it in CCR-T)")
	flag.StringVar(&o.dataContext, "data-context", "32251@3gpp.org", "Service-Context-Id of the data session")
	flag.StringVar(&o.smsContext, "sms-context", "32274@3gpp.org", "Service-Context-Id of the SMS event")
	flag.BoolVar(&o.event, "event", true, "send the SMS CCR-Event")
	flag.BoolVar(&o.negative, "negative", false, "also send CCRs that must fail: unknown subscriber (5030), unknown Service-Context-Id (5031)")
	flag.StringVar(&o.unknownMSISDN, "unknown-msisdn", "46799999999", "MSISDN the server does not know (-negative)")
	flag.StringVar(&o.unknownContext, "unknown-context", "99999@3gpp.org", "Service-Context-Id the server does not rate (-negative)")
	flag.UintVar(&expect, "expect-result", 2001, "Result-Code expected in the CCA-I and the CCA-Event; anything but 2001 skips CCR-U/T")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Second, "how long to wait for each answer")
	flag.BoolVar(&o.verbose, "v", false, "print every message sent and received")
	flag.Parse()
	if flag.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", flag.Args())
	}
	o.expectResult = uint32(expect)
	for _, f := range strings.Split(groups, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("-rating-groups: %q is not a rating group", f)
		}
		o.ratingGroups = append(o.ratingGroups, uint32(n))
	}
	if len(o.ratingGroups) == 0 {
		return nil, errors.New("-rating-groups: at least one rating group is needed")
	}
	return o, nil
}

func main() {
	o, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gyclient:", err)
		os.Exit(2)
	}
	c := &client{opt: o}
	if err := c.run(); err != nil {
		fmt.Printf("FAIL %v\n", err)
		fmt.Printf("FAIL: %d checks passed before the failure\n", c.passed)
		if c.conn != nil {
			c.conn.Close()
		}
		os.Exit(1)
	}
	fmt.Printf("PASS: all %d checks passed\n", c.passed)
}

// client holds one connection and the state of the checks.
type client struct {
	opt     *options
	cfg     *sm.Settings
	conn    diam.Conn
	answers chan *diam.Message
	errs    chan error
	passed  int
}

// stepError names the step that failed.
type stepError struct {
	step string
	err  error
}

func (e *stepError) Error() string { return e.step + ": " + e.err.Error() }

func fail(step string, format string, args ...interface{}) error {
	return &stepError{step, fmt.Errorf(format, args...)}
}

func (c *client) ok(format string, args ...interface{}) {
	c.passed++
	fmt.Printf("ok "+format+"\n", args...)
}

func (c *client) run() error {
	o := c.opt
	c.cfg = &sm.Settings{
		OriginHost:       datatype.DiameterIdentity(o.originHost),
		OriginRealm:      datatype.DiameterIdentity(o.originRealm),
		VendorID:         vendor3GPP,
		ProductName:      "gyclient",
		OriginStateID:    datatype.Unsigned32(time.Now().Unix()),
		FirmwareRevision: 1,
	}
	mux := sm.New(c.cfg)
	c.answers = make(chan *diam.Message, 16)
	c.errs = make(chan error, 16)
	deliver := func(_ diam.Conn, m *diam.Message) {
		if o.verbose {
			fmt.Printf("<<< received\n%s\n", m)
		}
		c.answers <- m
	}
	mux.HandleFunc("CCA", deliver)
	mux.HandleFunc("DWA", deliver)
	mux.HandleFunc("DPA", deliver)
	mux.HandleFunc("ALL", func(_ diam.Conn, m *diam.Message) {
		c.errs <- fmt.Errorf("unexpected message: command %d flags 0x%02x app %d",
			m.Header.CommandCode, m.Header.CommandFlags, m.Header.ApplicationID)
	})
	go func() {
		for r := range mux.ErrorReports() {
			c.errs <- r.Error
		}
	}()

	cli := &sm.Client{
		Dict:               dict.Default,
		Handler:            mux,
		MaxRetransmits:     0,
		RetransmitInterval: o.timeout,
		EnableWatchdog:     false,
		SupportedVendorID: []*diam.AVP{
			u32(avp.SupportedVendorID, vendor3GPP),
		},
		AuthApplicationID: []*diam.AVP{
			u32(avp.AuthApplicationID, appCreditControl),
		},
		VendorSpecificApplicationID: []*diam.AVP{
			group(avp.VendorSpecificApplicationID,
				u32(avp.VendorID, vendor3GPP),
				u32(avp.AuthApplicationID, appCreditControl)),
		},
	}
	conn, err := cli.DialTimeout(o.addr, o.timeout)
	if err != nil {
		return fail("CER/CEA", "connect and handshake with %s: %v", o.addr, err)
	}
	c.conn = conn
	meta, ok := smpeer.FromContext(conn.Context())
	if !ok {
		return fail("CER/CEA", "no peer identity after the handshake")
	}
	c.ok("CER/CEA: Result-Code 2001, peer %s realm %s", string(meta.OriginHost), string(meta.OriginRealm))

	if err := c.dataSession(); err != nil {
		return err
	}
	if err := c.watchdog(); err != nil {
		return err
	}
	if o.event {
		if err := c.smsEvent(); err != nil {
			return err
		}
	} else {
		fmt.Println("skip CCR-E: -event=false")
	}
	if o.negative {
		if err := c.negativeTests(); err != nil {
			return err
		}
	}
	return c.disconnect()
}

// newSessionID makes a Session-Id of the RFC 6733 form
// <DiameterIdentity>;<high 32 bits>;<low 32 bits>[;<optional>].
func (c *client) newSessionID(tag string) string {
	return fmt.Sprintf("%s;%d;%d;%s", c.opt.originHost, uint32(time.Now().Unix()), rand.Uint32(), tag)
}

// exchange sends req and waits for its answer. With one request in flight
// the answer must carry the same Hop-by-Hop and End-to-End identifiers.
func (c *client) exchange(step string, req *diam.Message) (*diam.Message, error) {
	if c.opt.verbose {
		fmt.Printf(">>> sending\n%s\n", req)
	}
	if _, err := req.WriteTo(c.conn); err != nil {
		return nil, fail(step, "send: %v", err)
	}
	var ans *diam.Message
	select {
	case ans = <-c.answers:
	case err := <-c.errs:
		return nil, fail(step, "while waiting for the answer: %v", err)
	case <-c.conn.(diam.CloseNotifier).CloseNotify():
		return nil, fail(step, "the server closed the connection instead of answering")
	case <-time.After(c.opt.timeout):
		return nil, fail(step, "no answer within %s", c.opt.timeout)
	}
	h, rh := ans.Header, req.Header
	if h.HopByHopID != rh.HopByHopID {
		return nil, fail(step, "Hop-by-Hop Identifier 0x%08x, sent 0x%08x", h.HopByHopID, rh.HopByHopID)
	}
	if h.EndToEndID != rh.EndToEndID {
		return nil, fail(step, "End-to-End Identifier 0x%08x, sent 0x%08x", h.EndToEndID, rh.EndToEndID)
	}
	if h.CommandCode != rh.CommandCode || h.ApplicationID != rh.ApplicationID {
		return nil, fail(step, "answer is command %d app %d, sent command %d app %d",
			h.CommandCode, h.ApplicationID, rh.CommandCode, rh.ApplicationID)
	}
	if h.CommandFlags&diam.RequestFlag != 0 {
		return nil, fail(step, "answer has the R bit set")
	}
	if ans.DecodeErr != nil {
		return nil, fail(step, "answer does not decode: %v", ans.DecodeErr)
	}
	return ans, nil
}

// ccr starts a Credit-Control-Request with the AVPs every CCR carries.
func (c *client) ccr(sid, context string, reqType, reqNum uint32) *diam.Message {
	m := diam.NewRequest(diam.CreditControl, appCreditControl, dict.Default)
	m.Header.CommandFlags |= diam.ProxiableFlag
	m.NewAVP(avp.SessionID, avp.Mbit, 0, datatype.UTF8String(sid))
	m.NewAVP(avp.OriginHost, avp.Mbit, 0, c.cfg.OriginHost)
	m.NewAVP(avp.OriginRealm, avp.Mbit, 0, c.cfg.OriginRealm)
	m.NewAVP(avp.DestinationRealm, avp.Mbit, 0, datatype.DiameterIdentity(c.opt.destRealm))
	m.AddAVP(u32(avp.AuthApplicationID, appCreditControl))
	m.NewAVP(avp.ServiceContextID, avp.Mbit, 0, datatype.UTF8String(context))
	m.AddAVP(enum(avp.CCRequestType, int32(reqType)))
	m.AddAVP(u32(avp.CCRequestNumber, reqNum))
	return m
}

func (c *client) subscription(msisdn string) *diam.AVP {
	return group(avp.SubscriptionID,
		enum(avp.SubscriptionIDType, subscriptionE164),
		diam.NewAVP(avp.SubscriptionIDData, avp.Mbit, 0, datatype.UTF8String(msisdn)))
}

func (c *client) rsu() *diam.AVP {
	if c.opt.rsuOctets == 0 {
		return group(avp.RequestedServiceUnit)
	}
	return group(avp.RequestedServiceUnit, u64(avp.CCTotalOctets, c.opt.rsuOctets))
}

// usu reports used octets, split a quarter uplink, the rest downlink.
func usu(used uint64, reason int32, withReason bool) *diam.AVP {
	in := used / 4
	members := []*diam.AVP{
		u64(avp.CCTotalOctets, used),
		u64(avp.CCInputOctets, in),
		u64(avp.CCOutputOctets, used-in),
	}
	if withReason {
		members = append(members, reportingReason(reason))
	}
	return group(avp.UsedServiceUnit, members...)
}

// initialCCR builds a CCR-Initial for msisdn in the given context.
func (c *client) initialCCR(sid, context, msisdn string) *diam.Message {
	m := c.ccr(sid, context, ccrInitial, 0)
	m.AddAVP(c.subscription(msisdn))
	m.AddAVP(enum(avp.MultipleServicesIndicator, 1))
	for _, rg := range c.opt.ratingGroups {
		m.AddAVP(group(avp.MultipleServicesCreditControl,
			c.rsu(),
			u32(avp.RatingGroup, rg)))
	}
	return m
}

func (c *client) dataSession() error {
	o := c.opt
	sid := c.newSessionID("data")

	// CCR-Initial.
	ans, err := c.exchange("CCR-I", c.initialCCR(sid, o.dataContext, o.msisdn))
	if err != nil {
		return err
	}
	info, err := checkCCA("CCR-I", ans, sid, ccrInitial, 0, o.expectResult)
	if err != nil {
		return err
	}
	if o.expectResult != 2001 {
		c.ok("CCR-I: Result-Code %d as expected", info.resultCode)
		fmt.Println("skip CCR-U, CCR-T: no session was opened")
		return nil
	}
	grants, err := info.requireGrants("CCR-I", o.ratingGroups)
	if err != nil {
		return err
	}
	c.ok("CCR-I: Result-Code 2001, GSU %s", formatGrants(o.ratingGroups, grants))

	// CCR-Update: the whole grant is used up (QUOTA_EXHAUSTED), ask again.
	m := c.ccr(sid, o.dataContext, ccrUpdate, 1)
	used := map[uint32]uint64{}
	for _, rg := range o.ratingGroups {
		used[rg] = grants[rg]
		if o.usedOctets != 0 {
			used[rg] = o.usedOctets
		}
		m.AddAVP(group(avp.MultipleServicesCreditControl,
			c.rsu(),
			usu(used[rg], reportingQuotaExhausted, true),
			u32(avp.RatingGroup, rg)))
	}
	if ans, err = c.exchange("CCR-U", m); err != nil {
		return err
	}
	if info, err = checkCCA("CCR-U", ans, sid, ccrUpdate, 1, 2001); err != nil {
		return err
	}
	if grants, err = info.requireGrants("CCR-U", o.ratingGroups); err != nil {
		return err
	}
	c.ok("CCR-U: Result-Code 2001, reported %s, GSU %s",
		formatGrants(o.ratingGroups, used), formatGrants(o.ratingGroups, grants))

	// CCR-Terminate: half of the last grant was used.
	m = c.ccr(sid, o.dataContext, ccrTermination, 2)
	m.AddAVP(enum(avp.TerminationCause, diameterLogout))
	for _, rg := range o.ratingGroups {
		used[rg] = grants[rg] / 2
		if o.usedOctets != 0 {
			used[rg] = o.usedOctets
		}
		m.AddAVP(group(avp.MultipleServicesCreditControl,
			usu(used[rg], 0, false),
			u32(avp.RatingGroup, rg),
			reportingReason(reportingFinal)))
	}
	if ans, err = c.exchange("CCR-T", m); err != nil {
		return err
	}
	if info, err = checkCCA("CCR-T", ans, sid, ccrTermination, 2, 2001); err != nil {
		return err
	}
	for rg, s := range info.mscc {
		if s.resultCode != 0 && s.resultCode != 2001 {
			return fail("CCR-T", "MSCC rating group %d: Result-Code %d", rg, s.resultCode)
		}
	}
	c.ok("CCR-T: Result-Code 2001, reported %s", formatGrants(o.ratingGroups, used))
	return nil
}

func (c *client) watchdog() error {
	m := diam.NewRequest(diam.DeviceWatchdog, 0, dict.Default)
	m.NewAVP(avp.OriginHost, avp.Mbit, 0, c.cfg.OriginHost)
	m.NewAVP(avp.OriginRealm, avp.Mbit, 0, c.cfg.OriginRealm)
	m.NewAVP(avp.OriginStateID, avp.Mbit, 0, c.cfg.OriginStateID)
	ans, err := c.exchange("DWR/DWA", m)
	if err != nil {
		return err
	}
	rc, err := checkBase("DWR/DWA", ans)
	if err != nil {
		return err
	}
	if rc != 2001 {
		return fail("DWR/DWA", "Result-Code %d, want 2001", rc)
	}
	c.ok("DWR/DWA: Result-Code 2001")
	return nil
}

func (c *client) smsEvent() error {
	o := c.opt
	sid := c.newSessionID("sms")
	m := c.ccr(sid, o.smsContext, ccrEvent, 0)
	m.NewAVP(avp.EventTimestamp, avp.Mbit, 0, datatype.Time(time.Now()))
	m.AddAVP(c.subscription(o.msisdn))
	m.AddAVP(enum(avp.RequestedAction, directDebiting))
	m.AddAVP(group(avp.RequestedServiceUnit, u64(avp.CCServiceSpecificUnits, 1)))
	ans, err := c.exchange("CCR-E", m)
	if err != nil {
		return err
	}
	info, err := checkCCA("CCR-E", ans, sid, ccrEvent, 0, o.expectResult)
	if err != nil {
		return err
	}
	if o.expectResult != 2001 {
		c.ok("CCR-E: Result-Code %d as expected", info.resultCode)
		return nil
	}
	// The grant is at command level (we asked there) or, from servers that
	// always answer in MSCC, in a single MSCC.
	units, found := info.gsu.units, info.gsu.present
	if !found {
		for _, s := range info.mscc {
			if s.gsu.present {
				units, found = s.gsu.units, true
			}
		}
	}
	if !found {
		return fail("CCR-E", "no Granted-Service-Unit in the CCA")
	}
	if units < 1 {
		return fail("CCR-E", "Granted-Service-Unit has CC-Service-Specific-Units %d, want >= 1", units)
	}
	c.ok("CCR-E: Result-Code 2001, GSU units=%d", units)
	return nil
}

func (c *client) negativeTests() error {
	o := c.opt
	sid := c.newSessionID("unknown-user")
	ans, err := c.exchange("CCR-I unknown subscriber", c.initialCCR(sid, o.dataContext, o.unknownMSISDN))
	if err != nil {
		return err
	}
	info, err := checkCCA("CCR-I unknown subscriber", ans, sid, ccrInitial, 0, 5030)
	if err != nil {
		return err
	}
	if info.eBit {
		fmt.Println("warn CCR-I unknown subscriber: E bit set on a 5xxx answer (should be clear)")
	}
	c.ok("CCR-I unknown subscriber %s: Result-Code 5030 (USER_UNKNOWN)", o.unknownMSISDN)

	sid = c.newSessionID("unknown-context")
	ans, err = c.exchange("CCR-I unknown context", c.initialCCR(sid, o.unknownContext, o.msisdn))
	if err != nil {
		return err
	}
	if info, err = checkCCA("CCR-I unknown context", ans, sid, ccrInitial, 0, 5031); err != nil {
		return err
	}
	if info.failedAVPs == 0 {
		return fail("CCR-I unknown context", "Result-Code 5031 without Failed-AVP (RFC 8506 requires it)")
	}
	if info.eBit {
		fmt.Println("warn CCR-I unknown context: E bit set on a 5xxx answer (should be clear)")
	}
	c.ok("CCR-I unknown Service-Context-Id %s: Result-Code 5031 (RATING_FAILED) with Failed-AVP", o.unknownContext)
	return nil
}

func (c *client) disconnect() error {
	m := diam.NewRequest(diam.DisconnectPeer, 0, dict.Default)
	m.NewAVP(avp.OriginHost, avp.Mbit, 0, c.cfg.OriginHost)
	m.NewAVP(avp.OriginRealm, avp.Mbit, 0, c.cfg.OriginRealm)
	m.AddAVP(enum(avp.DisconnectCause, disconnectRebooting))
	ans, err := c.exchange("DPR/DPA", m)
	if err != nil {
		return err
	}
	rc, err := checkBase("DPR/DPA", ans)
	if err != nil {
		return err
	}
	if rc != 2001 {
		return fail("DPR/DPA", "Result-Code %d, want 2001", rc)
	}
	// The peer that receives the DPA closes the transport.
	c.conn.Close()
	c.ok("DPR/DPA: Result-Code 2001, connection closed")
	return nil
}

func formatGrants(groups []uint32, v map[uint32]uint64) string {
	parts := make([]string, 0, len(groups))
	for _, rg := range groups {
		parts = append(parts, fmt.Sprintf("rg%d=%d", rg, v[rg]))
	}
	return strings.Join(parts, " ")
}
