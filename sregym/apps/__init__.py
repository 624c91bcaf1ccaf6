"""sregym.apps"""
