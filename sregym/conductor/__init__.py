"""sregym.conductor"""
