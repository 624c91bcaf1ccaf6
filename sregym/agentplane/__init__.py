"""sregym.agentplane"""
