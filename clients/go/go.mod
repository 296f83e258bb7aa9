module queen

go 1.19
