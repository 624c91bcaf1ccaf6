module sregym.local/httpecho

go 1.25
