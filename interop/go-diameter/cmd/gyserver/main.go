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
	"github.com/fiorix/go-diameter/v4/diam/datatype"
	"github.com/fiorix/go-diameter/v4/diam/dict"
	"github.com/fiorix/go-diameter/v4/diam/sm"

	"gyro.test/interop/internal/ccserver"
)

const vendor3GPP = 10415

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
	s := ccserver.New(settings, *gsuOctets, uint32(*validity))
	mux := sm.New(settings)
	s.Register(mux)
	// Answer what we can rather than drop a connection over an AVP whose
	// value does not decode with go-diameter's dictionary.
	dict.Default.Strict = false

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
			s.Answered(), errorsSeen.Load())
		os.Exit(0)
	}()

	fmt.Fprintf(os.Stderr, "gyserver: listening on %s (GOMAXPROCS %d); not an OCS: grants everything, keeps no balances\n",
		*addr, runtime.GOMAXPROCS(0))
	if err := diam.ListenAndServe(*addr, mux, dict.Default); err != nil {
		log.Fatal(err)
	}
}
