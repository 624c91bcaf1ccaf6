"""sregym.cli"""
