// Package ccserver is the request handling of gyserver: a credit-control
// "server" that grants every CCR and keeps no state. It is not an online
// charging server; it is a baseline for throughput comparisons.
package ccserver

import (
	"sync/atomic"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
	"github.com/fiorix/go-diameter/v4/diam/sm"
)

const (
	appCreditControl = 4
	ccrTermination   = 3
	ccrEvent         = 4
)

// Server answers CCR and DPR. It holds the AVPs that are the same in every
// answer; AVPs are only read when a message is serialized, so they are
// shared by all connections.
type Server struct {
	success     *diam.AVP
	originHost  *diam.AVP
	originRealm *diam.AVP
	authApp     *diam.AVP
	validity    *diam.AVP
	gsuOctets   *diam.AVP
	gsuEvent    *diam.AVP
	answered    atomic.Uint64
}

// New makes a Server answering as cfg's Origin-Host and Origin-Realm,
// granting octets per MSCC with the given Validity-Time.
func New(cfg *sm.Settings, octets uint64, validity uint32) *Server {
	return &Server{
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

// Answered is the number of CCAs written so far.
func (s *Server) Answered() uint64 { return s.answered.Load() }

// Register installs the CCR and DPR handlers on a state machine.
func (s *Server) Register(mux *sm.StateMachine) {
	mux.HandleFunc("CCR", s.HandleCCR)
	mux.HandleFunc("DPR", s.HandleDPR)
}

// HandleCCR answers a Credit-Control-Request with a CCA granting every MSCC.
func (s *Server) HandleCCR(c diam.Conn, m *diam.Message) {
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

// HandleDPR answers a Disconnect-Peer-Request with DPA 2001.
func (s *Server) HandleDPR(c diam.Conn, m *diam.Message) {
	ans := answerTo(m)
	ans.AddAVP(s.success)
	ans.AddAVP(s.originHost)
	ans.AddAVP(s.originRealm)
	ans.WriteTo(c)
	// The peer that receives the DPA closes the connection.
}
