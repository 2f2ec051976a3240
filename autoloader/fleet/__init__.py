"""autoloader.fleet"""
