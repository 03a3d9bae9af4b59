module chronik/compat/driver

go 1.26.0
