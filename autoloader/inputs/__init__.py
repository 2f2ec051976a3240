"""autoloader.inputs"""
