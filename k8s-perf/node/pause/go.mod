module chronik/pause

go 1.26
