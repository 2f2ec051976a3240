"""autoloader.store"""
