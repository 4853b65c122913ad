module gyro.test/interop

go 1.25.0

require github.com/fiorix/go-diameter/v4 v4.1.0

require github.com/ishidawataru/sctp v0.0.0-20251114114122-19ddcbc6aae2 // indirect
