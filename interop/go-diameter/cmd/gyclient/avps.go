package main

import (
	"encoding/binary"
	"fmt"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
)

// Vendor and AVP codes that go-diameter's avp package names differently or
// that we want to spell out with their vendor.
const (
	vendor3GPP = 10415

	codeReportingReason = 872 // 3GPP TS 32.299, vendor 10415

	appCreditControl = 4
)

// Reporting-Reason values (3GPP TS 32.299 7.2.175).
const (
	reportingFinal          = 2
	reportingQuotaExhausted = 3
)

// Subscription-Id-Type, CC-Request-Type, Requested-Action,
// Termination-Cause and Disconnect-Cause values used by the client.
const (
	subscriptionE164 = 0

	ccrInitial     = 1
	ccrUpdate      = 2
	ccrTermination = 3
	ccrEvent       = 4

	directDebiting = 0

	diameterLogout = 1

	disconnectRebooting = 0
)

func u32(code uint32, v uint32) *diam.AVP {
	return diam.NewAVP(code, avp.Mbit, 0, datatype.Unsigned32(v))
}

func u64(code uint32, v uint64) *diam.AVP {
	return diam.NewAVP(code, avp.Mbit, 0, datatype.Unsigned64(v))
}

func enum(code uint32, v int32) *diam.AVP {
	return diam.NewAVP(code, avp.Mbit, 0, datatype.Enumerated(v))
}

func group(code uint32, children ...*diam.AVP) *diam.AVP {
	return diam.NewAVP(code, avp.Mbit, 0, &diam.GroupedAVP{AVP: children})
}

// reportingReason builds the 3GPP Reporting-Reason AVP with V and M set
// and the 3GPP vendor id, independent of any dictionary.
func reportingReason(v int32) *diam.AVP {
	return diam.NewAVP(codeReportingReason, avp.Mbit|avp.Vbit, vendor3GPP, datatype.Enumerated(v))
}

// top returns the top-level AVPs of m with the given code and no vendor.
// Unlike Message.FindAVP it never descends into grouped AVPs, so a
// Result-Code inside an MSCC is never mistaken for the command-level one.
func top(avps []*diam.AVP, code uint32) []*diam.AVP {
	var out []*diam.AVP
	for _, a := range avps {
		if a.Code == code && a.VendorID == 0 {
			out = append(out, a)
		}
	}
	return out
}

// one returns the single AVP with the given code among avps, or an error
// when it is missing or repeated.
func one(avps []*diam.AVP, code uint32, name string) (*diam.AVP, error) {
	found := top(avps, code)
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("%s (%d) missing", name, code)
	case 1:
		return found[0], nil
	default:
		return nil, fmt.Errorf("%s (%d) occurs %d times", name, code, len(found))
	}
}

// children returns the members of a grouped AVP.
func children(a *diam.AVP) ([]*diam.AVP, error) {
	g, ok := a.Data.(*diam.GroupedAVP)
	if !ok {
		return nil, fmt.Errorf("AVP %d is not grouped (%T)", a.Code, a.Data)
	}
	return g.AVP, nil
}

// uintValue reads any unsigned or enumerated AVP value as a uint64. Values
// the dictionary did not know are read from their raw 4 or 8 bytes.
func uintValue(a *diam.AVP) (uint64, error) {
	switch v := a.Data.(type) {
	case datatype.Unsigned32:
		return uint64(v), nil
	case datatype.Unsigned64:
		return uint64(v), nil
	case datatype.Enumerated:
		return uint64(uint32(v)), nil
	case datatype.Integer32:
		return uint64(uint32(v)), nil
	case datatype.Integer64:
		return uint64(v), nil
	case datatype.Unknown:
		switch len(v) {
		case 4:
			return uint64(binary.BigEndian.Uint32(v)), nil
		case 8:
			return binary.BigEndian.Uint64(v), nil
		}
	case datatype.OctetString:
		b := []byte(v)
		switch len(b) {
		case 4:
			return uint64(binary.BigEndian.Uint32(b)), nil
		case 8:
			return binary.BigEndian.Uint64(b), nil
		}
	}
	return 0, fmt.Errorf("AVP %d: not an integer (%T)", a.Code, a.Data)
}

// oneUint returns the value of the single AVP with the given code.
func oneUint(avps []*diam.AVP, code uint32, name string) (uint64, error) {
	a, err := one(avps, code, name)
	if err != nil {
		return 0, err
	}
	return uintValue(a)
}

// stringValue reads a UTF8String, DiameterIdentity or OctetString AVP.
func stringValue(a *diam.AVP) (string, error) {
	switch v := a.Data.(type) {
	case datatype.UTF8String:
		return string(v), nil
	case datatype.DiameterIdentity:
		return string(v), nil
	case datatype.OctetString:
		return string(v), nil
	case datatype.Unknown:
		return string(v), nil
	}
	return "", fmt.Errorf("AVP %d: not a string (%T)", a.Code, a.Data)
}
