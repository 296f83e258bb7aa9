module github.com/queen-broker/queen/clients/go

go 1.19
