module sregym.local/agentproxy

go 1.25
