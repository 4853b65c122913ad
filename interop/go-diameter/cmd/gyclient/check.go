package main

import (
	"fmt"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
)

// units is what one Granted-Service-Unit holds that the client looks at.
type units struct {
	present     bool
	totalOctets uint64
	hasOctets   bool
	units       uint64 // CC-Service-Specific-Units
}

// msccInfo is one Multiple-Services-Credit-Control of an answer.
type msccInfo struct {
	resultCode uint32 // 0 when absent
	gsu        units
}

// ccaInfo is what the checks learnt from a Credit-Control-Answer.
type ccaInfo struct {
	resultCode uint32
	eBit       bool
	failedAVPs int
	gsu        units                // command-level Granted-Service-Unit
	mscc       map[uint32]*msccInfo // by Rating-Group
}

// checkBase checks what every answer carries and returns its Result-Code.
func checkBase(step string, ans *diam.Message) (uint32, error) {
	for _, f := range []struct {
		code uint32
		name string
	}{{avp.OriginHost, "Origin-Host"}, {avp.OriginRealm, "Origin-Realm"}} {
		a, err := one(ans.AVP, f.code, f.name)
		if err != nil {
			return 0, fail(step, "%v", err)
		}
		if s, err := stringValue(a); err != nil || s == "" {
			return 0, fail(step, "%s is empty or not an identity", f.name)
		}
	}
	rc, err := oneUint(ans.AVP, avp.ResultCode, "Result-Code")
	if err != nil {
		return 0, fail(step, "%v", err)
	}
	return uint32(rc), nil
}

// checkCCA checks a Credit-Control-Answer against the request it answers:
// Session-Id first and equal, Result-Code as wanted, identity AVPs,
// Auth-Application-Id 4, CC-Request-Type and CC-Request-Number echoed.
func checkCCA(step string, ans *diam.Message, sid string, reqType, reqNum, wantRC uint32) (*ccaInfo, error) {
	info := &ccaInfo{
		eBit: ans.Header.CommandFlags&diam.ErrorFlag != 0,
		mscc: map[uint32]*msccInfo{},
	}
	if len(ans.AVP) == 0 || ans.AVP[0].Code != avp.SessionID {
		return nil, fail(step, "Session-Id is not the first AVP of the CCA")
	}
	if got, _ := stringValue(ans.AVP[0]); got != sid {
		return nil, fail(step, "Session-Id %q, sent %q", got, sid)
	}
	if n := len(top(ans.AVP, avp.SessionID)); n != 1 {
		return nil, fail(step, "Session-Id occurs %d times", n)
	}
	rc, err := checkBase(step, ans)
	if err != nil {
		return nil, err
	}
	info.resultCode = rc
	info.failedAVPs = len(top(ans.AVP, avp.FailedAVP))
	if rc != wantRC {
		detail := ""
		if a := top(ans.AVP, avp.ErrorMessage); len(a) > 0 {
			s, _ := stringValue(a[0])
			detail = fmt.Sprintf(" (Error-Message %q)", s)
		}
		return nil, fail(step, "Result-Code %d, want %d%s", rc, wantRC, detail)
	}
	if rc >= 3000 && rc < 4000 && !info.eBit {
		return nil, fail(step, "Result-Code %d (3xxx) without the E bit", rc)
	}
	app, err := oneUint(ans.AVP, avp.AuthApplicationID, "Auth-Application-Id")
	if err != nil {
		return nil, fail(step, "%v", err)
	}
	if app != appCreditControl {
		return nil, fail(step, "Auth-Application-Id %d, want 4", app)
	}
	t, err := oneUint(ans.AVP, avp.CCRequestType, "CC-Request-Type")
	if err != nil {
		return nil, fail(step, "%v", err)
	}
	if uint32(t) != reqType {
		return nil, fail(step, "CC-Request-Type %d, sent %d", t, reqType)
	}
	n, err := oneUint(ans.AVP, avp.CCRequestNumber, "CC-Request-Number")
	if err != nil {
		return nil, fail(step, "%v", err)
	}
	if uint32(n) != reqNum {
		return nil, fail(step, "CC-Request-Number %d, sent %d", n, reqNum)
	}
	if g := top(ans.AVP, avp.GrantedServiceUnit); len(g) > 0 {
		if info.gsu, err = readUnits(g[0]); err != nil {
			return nil, fail(step, "Granted-Service-Unit: %v", err)
		}
	}
	for _, a := range top(ans.AVP, avp.MultipleServicesCreditControl) {
		members, err := children(a)
		if err != nil {
			return nil, fail(step, "MSCC: %v", err)
		}
		rg, err := oneUint(members, avp.RatingGroup, "Rating-Group")
		if err != nil {
			return nil, fail(step, "MSCC: %v", err)
		}
		if _, dup := info.mscc[uint32(rg)]; dup {
			return nil, fail(step, "two MSCC for rating group %d", rg)
		}
		s := &msccInfo{}
		if r := top(members, avp.ResultCode); len(r) > 0 {
			v, err := uintValue(r[0])
			if err != nil {
				return nil, fail(step, "MSCC rating group %d: Result-Code: %v", rg, err)
			}
			s.resultCode = uint32(v)
		}
		if g := top(members, avp.GrantedServiceUnit); len(g) > 0 {
			if s.gsu, err = readUnits(g[0]); err != nil {
				return nil, fail(step, "MSCC rating group %d: Granted-Service-Unit: %v", rg, err)
			}
		}
		info.mscc[uint32(rg)] = s
	}
	return info, nil
}

func readUnits(a *diam.AVP) (units, error) {
	u := units{present: true}
	members, err := children(a)
	if err != nil {
		return u, err
	}
	if v := top(members, avp.CCTotalOctets); len(v) > 0 {
		if u.totalOctets, err = uintValue(v[0]); err != nil {
			return u, err
		}
		u.hasOctets = true
	}
	if v := top(members, avp.CCServiceSpecificUnits); len(v) > 0 {
		if u.units, err = uintValue(v[0]); err != nil {
			return u, err
		}
	}
	return u, nil
}

// requireGrants checks that every rating group got an MSCC with
// Result-Code 2001 and a Granted-Service-Unit of CC-Total-Octets > 0, and
// returns the grants.
func (info *ccaInfo) requireGrants(step string, groups []uint32) (map[uint32]uint64, error) {
	grants := map[uint32]uint64{}
	for _, rg := range groups {
		s, ok := info.mscc[rg]
		if !ok {
			return nil, fail(step, "no MSCC for rating group %d in the CCA", rg)
		}
		if s.resultCode == 0 {
			return nil, fail(step, "MSCC rating group %d has no Result-Code", rg)
		}
		if s.resultCode != 2001 {
			return nil, fail(step, "MSCC rating group %d: Result-Code %d, want 2001", rg, s.resultCode)
		}
		if !s.gsu.present {
			return nil, fail(step, "MSCC rating group %d has no Granted-Service-Unit", rg)
		}
		if !s.gsu.hasOctets || s.gsu.totalOctets == 0 {
			return nil, fail(step, "MSCC rating group %d: Granted-Service-Unit without CC-Total-Octets > 0", rg)
		}
		grants[rg] = s.gsu.totalOctets
	}
	return grants, nil
}
