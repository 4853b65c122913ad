// Command gyserver is a minimal Diameter credit-control server built on
// github.com/fiorix/go-diameter. It is NOT a functional online charging
// server: it keeps no accounts, balances, sessions or CDRs, and grants
// every request. It exists so that gyro's load generator can be run side by
// side against a server we did not write, to compare throughput and CPU
// cost per request on the same machine.
//
// What it does:
//
//   - CER/CEA and DWR/DWA are handled by go-diameter's state machine
//     (diam/sm); DPR is answered with DPA 2001.
//   - Every CCR is answered with a CCA: Session-Id (first), Result-Code
//     2001, Origin-Host, Origin-Realm, Auth-Application-Id 4, and the
//     request's CC-Request-Type and CC-Request-Number.
//   - For each MSCC in the request the CCA has an MSCC with the same
//     Rating-Group (and Service-Identifier), a Granted-Service-Unit
//     (CC-Total-Octets -gsu-octets, or CC-Service-Specific-Units 1 for
//     CC-Request-Type EVENT), Validity-Time -validity and Result-Code 2001.
//     TERMINATION requests get MSCC with Rating-Group and Result-Code only.
//   - A request with a command-level Requested-Service-Unit, or an EVENT
//     request with no MSCC, gets a command-level Granted-Service-Unit.
//
// Nothing is logged per message. On SIGINT or SIGTERM it prints how many
// CCRs it answered and exits.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
	"github.com/fiorix/go-diameter/v4/diam/dict"
	"github.com/fiorix/go-diameter/v4/diam/sm"
)

const (
	vendor3GPP       = 10415
	appCreditControl = 4
	ccrTermination   = 3
	ccrEvent         = 4
)

func main() {
	addr := flag.String("addr", "127.0.0.1:3869", "address to listen on (host:port)")
	host := flag.String("origin-host", "gyserver.gyro.test", "our Origin-Host")
	realm := flag.String("origin-realm", "gyro.test", "our Origin-Realm")
	gsuOctets := flag.Uint64("gsu-octets", 1000000, "CC-Total-Octets granted per MSCC")
	validity := flag.Uint("validity", 3600, "Validity-Time (seconds) sent with each grant")
	procs := flag.Int("procs", 0, "GOMAXPROCS (0: Go's default, one per CPU)")
	verbose := flag.Bool("v", false, "log connection and decoding errors")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "gyserver: unexpected arguments: %v\n", flag.Args())
		os.Exit(2)
	}
	if *procs > 0 {
		runtime.GOMAXPROCS(*procs)
	}

	settings := &sm.Settings{
		OriginHost:       datatype.DiameterIdentity(*host),
		OriginRealm:      datatype.DiameterIdentity(*realm),
		VendorID:         vendor3GPP,
		ProductName:      "gyserver",
		OriginStateID:    datatype.Unsigned32(time.Now().Unix()),
		FirmwareRevision: 1,
	}
	s := newServer(settings, *gsuOctets, uint32(*validity))
	mux := sm.New(settings)
	mux.HandleFunc("CCR", s.handleCCR)
	mux.HandleFunc("DPR", s.handleDPR)

	var errorsSeen atomic.Uint64
	go func() {
		for r := range mux.ErrorReports() {
			errorsSeen.Add(1)
			if *verbose {
				log.Println(r)
			}
		}
	}()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sig
		fmt.Fprintf(os.Stderr, "gyserver: answered %d CCRs, %d error reports\n",
			s.answered.Load(), errorsSeen.Load())
		os.Exit(0)
	}()

	fmt.Fprintf(os.Stderr, "gyserver: listening on %s (GOMAXPROCS %d); not an OCS: grants everything, keeps no balances\n",
		*addr, runtime.GOMAXPROCS(0))
	if err := diam.ListenAndServe(*addr, mux, dict.Default); err != nil {
		log.Fatal(err)
	}
}

// server holds the AVPs that are the same in every answer. AVPs are only
// read when a message is serialized, so they are shared by all connections.
type server struct {
	success     *diam.AVP
	originHost  *diam.AVP
	originRealm *diam.AVP
	authApp     *diam.AVP
	validity    *diam.AVP
	gsuOctets   *diam.AVP
	gsuEvent    *diam.AVP
	answered    atomic.Uint64
}

func newServer(cfg *sm.Settings, octets uint64, validity uint32) *server {
	return &server{
		success:     diam.NewAVP(avp.ResultCode, avp.Mbit, 0, datatype.Unsigned32(diam.Success)),
		originHost:  diam.NewAVP(avp.OriginHost, avp.Mbit, 0, cfg.OriginHost),
		originRealm: diam.NewAVP(avp.OriginRealm, avp.Mbit, 0, cfg.OriginRealm),
		authApp:     diam.NewAVP(avp.AuthApplicationID, avp.Mbit, 0, datatype.Unsigned32(appCreditControl)),
		validity:    diam.NewAVP(avp.ValidityTime, avp.Mbit, 0, datatype.Unsigned32(validity)),
		gsuOctets: diam.NewAVP(avp.GrantedServiceUnit, avp.Mbit, 0, &diam.GroupedAVP{AVP: []*diam.AVP{
			diam.NewAVP(avp.CCTotalOctets, avp.Mbit, 0, datatype.Unsigned64(octets)),
		}}),
		gsuEvent: diam.NewAVP(avp.GrantedServiceUnit, avp.Mbit, 0, &diam.GroupedAVP{AVP: []*diam.AVP{
			diam.NewAVP(avp.CCServiceSpecificUnits, avp.Mbit, 0, datatype.Unsigned64(1)),
		}}),
	}
}

// answerTo starts an answer to m with the same identifiers and P bit.
func answerTo(m *diam.Message) *diam.Message {
	return diam.NewMessage(m.Header.CommandCode, m.Header.CommandFlags&diam.ProxiableFlag,
		m.Header.ApplicationID, m.Header.HopByHopID, m.Header.EndToEndID, m.Dictionary())
}

func enumValue(a *diam.AVP) int64 {
	switch v := a.Data.(type) {
	case datatype.Enumerated:
		return int64(v)
	case datatype.Unsigned32:
		return int64(v)
	case datatype.Integer32:
		return int64(v)
	}
	return -1
}

func (s *server) handleCCR(c diam.Conn, m *diam.Message) {
	var sid, reqType, reqNum *diam.AVP
	var mscc []*diam.AVP
	topRSU := false
	for _, a := range m.AVP {
		if a.VendorID != 0 {
			continue
		}
		switch a.Code {
		case avp.SessionID:
			if sid == nil {
				sid = a
			}
		case avp.CCRequestType:
			reqType = a
		case avp.CCRequestNumber:
			reqNum = a
		case avp.MultipleServicesCreditControl:
			mscc = append(mscc, a)
		case avp.RequestedServiceUnit:
			topRSU = true
		}
	}

	ans := answerTo(m)
	if sid == nil || reqType == nil || reqNum == nil {
		// Not a CCR we can echo: answer DIAMETER_MISSING_AVP with what we have.
		ans.AVP = make([]*diam.AVP, 0, 6)
		if sid != nil {
			ans.AddAVP(sid)
		}
		ans.NewAVP(avp.ResultCode, avp.Mbit, 0, datatype.Unsigned32(diam.MissingAVP))
		ans.AddAVP(s.originHost)
		ans.AddAVP(s.originRealm)
		ans.AddAVP(s.authApp)
		ans.WriteTo(c)
		return
	}
	typ := enumValue(reqType)

	ans.AVP = make([]*diam.AVP, 0, 8+len(mscc))
	ans.AddAVP(sid)
	ans.AddAVP(s.success)
	ans.AddAVP(s.originHost)
	ans.AddAVP(s.originRealm)
	ans.AddAVP(s.authApp)
	ans.AddAVP(reqType)
	ans.AddAVP(reqNum)

	gsu := s.gsuOctets
	if typ == ccrEvent {
		gsu = s.gsuEvent
	}
	if typ != ccrTermination && (topRSU || (typ == ccrEvent && len(mscc) == 0)) {
		ans.AddAVP(gsu)
	}
	for _, req := range mscc {
		g, ok := req.Data.(*diam.GroupedAVP)
		if !ok {
			continue
		}
		members := make([]*diam.AVP, 0, 5)
		if typ != ccrTermination {
			members = append(members, gsu)
		}
		for _, a := range g.AVP {
			if a.VendorID == 0 && (a.Code == avp.RatingGroup || a.Code == avp.ServiceIdentifier) {
				members = append(members, a)
			}
		}
		if typ != ccrTermination {
			members = append(members, s.validity)
		}
		members = append(members, s.success)
		ans.NewAVP(avp.MultipleServicesCreditControl, avp.Mbit, 0, &diam.GroupedAVP{AVP: members})
	}
	if _, err := ans.WriteTo(c); err == nil {
		s.answered.Add(1)
	}
}

func (s *server) handleDPR(c diam.Conn, m *diam.Message) {
	ans := answerTo(m)
	ans.AddAVP(s.success)
	ans.AddAVP(s.originHost)
	ans.AddAVP(s.originRealm)
	ans.WriteTo(c)
	// The peer that receives the DPA closes the connection.
}
