"""autoloader.search"""
