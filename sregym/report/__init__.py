"""sregym.report"""
