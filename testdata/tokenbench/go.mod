module example.com/tokenbench

go 1.21
